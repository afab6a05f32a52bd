//! An engine's health: whether its receives succeed, whether a failure is one that retrying
//! cannot mend, and whether it is draining.
//!
//! The receivers write it; [`Engine::health`](crate::Engine::health) and the Prometheus
//! exporter's `/healthz` and `/readyz` read it. Every engine that has a health view is known
//! to the process-wide [`registry`] while it lives.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::api::{CallError, CallErrorKind};

/// How long a failure that retrying cannot mend may last before the engine gives up, unless
/// [`EngineBuilder::give_up_after`](crate::EngineBuilder::give_up_after) says otherwise.
pub const DEFAULT_GIVE_UP_AFTER: Duration = Duration::from_secs(300);

/// Where an engine is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Built, its queue not opened yet.
    Starting,
    /// Its queue is open and its receivers are running.
    Running,
    /// Shutting down: no more receives, running handlers finishing, settlements flushing.
    Draining,
    /// Shut down, or gave up.
    Stopped,
}

impl Phase {
    /// A short, stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Draining => "draining",
            Self::Stopped => "stopped",
        }
    }
}

/// What an engine's health looked like at one moment. Read it with
/// [`HealthHandle::snapshot`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Health {
    /// The queue, as it was named.
    pub queue: String,
    /// Where the engine is in its life.
    pub phase: Phase,
    /// How long ago a receive last succeeded (empty or not); `None` before the first.
    pub since_last_receive: Option<Duration>,
    /// Receives failed in a row since the last that succeeded.
    pub consecutive_failures: u32,
    /// The last failed receive's error, while the failures last.
    pub last_failure: Option<CallError>,
    /// How long receives have failed in a way retrying cannot mend (the queue is gone, the
    /// credentials are refused), while they do.
    pub failing_permanently_for: Option<Duration>,
    /// Set once the engine gave up on such a failure: its `run` returns
    /// [`Error::GaveUp`](crate::Error::GaveUp).
    pub gave_up: bool,
}

impl Health {
    /// Whether the engine can work: its receives do not fail in a way retrying cannot mend,
    /// and it has not given up. A transient failure (throttling, a 5xx, the network) does not
    /// make it unhealthy: it backs off and retries.
    pub fn is_healthy(&self) -> bool {
        self.failing_permanently_for.is_none() && !self.gave_up
    }

    /// Whether the engine is taking work: its queue is open, it is not draining, and it is
    /// healthy.
    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Running && self.is_healthy()
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = if self.is_healthy() {
            "healthy"
        } else {
            "unhealthy"
        };
        write!(
            f,
            "queue={} phase={} status={} consecutive_failures={}",
            self.queue,
            self.phase.as_str(),
            status,
            self.consecutive_failures
        )?;
        if let Some(ago) = self.since_last_receive {
            write!(f, " last_receive_ago={:.3}s", ago.as_secs_f64())?;
        }
        if let Some(failure) = &self.last_failure {
            write!(f, " last_failure={}", failure.kind.as_str())?;
        }
        if let Some(failing) = self.failing_permanently_for {
            write!(f, " failing_permanently_for={:.3}s", failing.as_secs_f64())?;
        }
        if self.gave_up {
            write!(f, " gave_up=true")?;
        }
        Ok(())
    }
}

/// Reads an engine's health while it runs and after.
#[derive(Debug, Clone)]
pub struct HealthHandle(pub(crate) Arc<HealthCells>);

impl HealthHandle {
    /// The engine's health now.
    pub fn snapshot(&self) -> Health {
        self.0.snapshot()
    }
}

/// Whether a failed receive is one retrying cannot mend.
fn is_permanent(kind: CallErrorKind) -> bool {
    matches!(
        kind,
        CallErrorKind::QueueNotFound | CallErrorKind::AccessDenied
    )
}

/// The shared state behind a [`HealthHandle`].
#[derive(Debug)]
pub(crate) struct HealthCells {
    queue: String,
    give_up_after: Duration,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    last_receive: Option<Instant>,
    consecutive_failures: u32,
    last_failure: Option<CallError>,
    permanent_since: Option<Instant>,
    gave_up: Option<(CallError, Duration)>,
}

/// What a receiver does after a failed receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    /// Back off and try again.
    Retry,
    /// The failure could not be mended in the time allowed: stop receiving.
    GiveUp,
}

impl HealthCells {
    /// The health of an engine on `queue` that gives up after `give_up_after` of failures
    /// retrying cannot mend, registered in the process-wide [`registry`].
    pub(crate) fn new(queue: &str, give_up_after: Duration) -> Arc<Self> {
        let cells = Arc::new(Self {
            queue: queue.to_owned(),
            give_up_after,
            state: Mutex::new(State {
                phase: Phase::Starting,
                last_receive: None,
                consecutive_failures: 0,
                last_failure: None,
                permanent_since: None,
                gave_up: None,
            }),
        });
        registry::register(&cells);
        cells
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The queue is open and the receivers start.
    pub(crate) fn running(&self) {
        let mut state = self.state();
        if state.phase == Phase::Starting {
            state.phase = Phase::Running;
        }
    }

    /// Shutdown started: no more receives.
    pub(crate) fn draining(&self) {
        let mut state = self.state();
        if matches!(state.phase, Phase::Starting | Phase::Running) {
            state.phase = Phase::Draining;
        }
    }

    /// Shut down.
    pub(crate) fn stopped(&self) {
        self.state().phase = Phase::Stopped;
    }

    /// A receive succeeded: the failures, permanent or not, are over.
    pub(crate) fn receive_succeeded(&self) {
        let mut state = self.state();
        state.last_receive = Some(Instant::now());
        state.consecutive_failures = 0;
        state.last_failure = None;
        state.permanent_since = None;
    }

    /// A receive failed with `error`: whether to retry, or give up because a failure retrying
    /// cannot mend has lasted the time allowed.
    pub(crate) fn receive_failed(&self, error: &CallError) -> AfterFailure {
        let now = Instant::now();
        let mut state = self.state();
        state.consecutive_failures = state.consecutive_failures.saturating_add(1);
        state.last_failure = Some(error.clone());
        if !is_permanent(error.kind) {
            state.permanent_since = None;
            return AfterFailure::Retry;
        }
        let since = *state.permanent_since.get_or_insert(now);
        let failing = now.saturating_duration_since(since);
        if failing < self.give_up_after {
            return AfterFailure::Retry;
        }
        if state.gave_up.is_none() {
            state.gave_up = Some((error.clone(), failing));
        }
        AfterFailure::GiveUp
    }

    /// The failure the engine gave up on, and how long it had lasted.
    pub(crate) fn gave_up(&self) -> Option<(CallError, Duration)> {
        self.state().gave_up.clone()
    }

    /// The queue, as it was named.
    pub(crate) fn queue(&self) -> &str {
        &self.queue
    }

    pub(crate) fn snapshot(&self) -> Health {
        let now = Instant::now();
        let state = self.state();
        Health {
            queue: self.queue.clone(),
            phase: state.phase,
            since_last_receive: state
                .last_receive
                .map(|at| now.saturating_duration_since(at)),
            consecutive_failures: state.consecutive_failures,
            last_failure: state.last_failure.clone(),
            failing_permanently_for: state
                .permanent_since
                .map(|since| now.saturating_duration_since(since)),
            gave_up: state.gave_up.is_some(),
        }
    }
}

/// Every engine's health in this process, while the engine (or a handle on its health) lives.
pub mod registry {
    use super::{Arc, Health, HealthCells, Mutex, PoisonError, Weak};

    static ENGINES: Mutex<Vec<Weak<HealthCells>>> = Mutex::new(Vec::new());

    pub(super) fn register(cells: &Arc<HealthCells>) {
        let mut engines = ENGINES.lock().unwrap_or_else(PoisonError::into_inner);
        engines.retain(|weak| weak.strong_count() > 0);
        engines.push(Arc::downgrade(cells));
    }

    /// The health of every engine of this process that has not been dropped, in the order
    /// they were built.
    pub fn snapshot() -> Vec<Health> {
        let engines = ENGINES.lock().unwrap_or_else(PoisonError::into_inner);
        engines
            .iter()
            .filter_map(Weak::upgrade)
            .map(|cells| cells.snapshot())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied() -> CallError {
        CallError::new(CallErrorKind::AccessDenied, "no")
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_failure_keeps_the_engine_healthy() {
        let cells = HealthCells::new("q", Duration::from_secs(10));
        cells.running();
        let throttled = CallError::new(CallErrorKind::Throttled, "slow down");
        for _ in 0..100 {
            assert_eq!(cells.receive_failed(&throttled), AfterFailure::Retry);
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        let health = cells.snapshot();
        assert!(health.is_healthy() && health.is_ready(), "{health}");
        assert_eq!(health.consecutive_failures, 100);
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_failure_is_unhealthy_at_once_and_gives_up_after_the_time_allowed() {
        let cells = HealthCells::new("q", Duration::from_secs(10));
        cells.running();
        assert_eq!(cells.receive_failed(&denied()), AfterFailure::Retry);
        let health = cells.snapshot();
        assert!(!health.is_healthy() && !health.is_ready(), "{health}");
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(cells.receive_failed(&denied()), AfterFailure::Retry);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(cells.receive_failed(&denied()), AfterFailure::GiveUp);
        let (error, lasted) = cells.gave_up().expect("gave up");
        assert_eq!(error.kind, CallErrorKind::AccessDenied);
        assert_eq!(lasted, Duration::from_secs(10));
        assert!(cells.snapshot().gave_up);
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_ends_a_permanent_failure() {
        let cells = HealthCells::new("q", Duration::from_secs(10));
        cells.running();
        cells.receive_failed(&denied());
        tokio::time::advance(Duration::from_secs(9)).await;
        cells.receive_succeeded();
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(cells.receive_failed(&denied()), AfterFailure::Retry);
        let health = cells.snapshot();
        assert_eq!(health.failing_permanently_for, Some(Duration::ZERO));
        assert_eq!(health.since_last_receive, Some(Duration::from_secs(5)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_draining_engine_is_healthy_but_not_ready() {
        let cells = HealthCells::new("q", Duration::from_secs(10));
        assert!(
            !cells.snapshot().is_ready(),
            "not ready before its queue is open"
        );
        cells.running();
        assert!(cells.snapshot().is_ready());
        cells.draining();
        let health = cells.snapshot();
        assert!(health.is_healthy() && !health.is_ready(), "{health}");
        cells.running();
        assert_eq!(cells.snapshot().phase, Phase::Draining, "no way back");
    }

    #[test]
    fn the_registry_holds_engines_while_they_live() {
        let cells = HealthCells::new("registry-test-queue", Duration::from_secs(1));
        let named = |name: &str| {
            registry::snapshot()
                .iter()
                .filter(|health| health.queue == name)
                .count()
        };
        assert_eq!(named("registry-test-queue"), 1);
        drop(cells);
        assert_eq!(named("registry-test-queue"), 0);
    }
}
