//! An engine's health: whether its receives succeed, whether a call it cannot work without
//! (a receive, a delete, a visibility change) fails in a way retrying cannot mend, and whether
//! it is draining.
//!
//! The receivers and the settlement's batch calls write it;
//! [`Engine::health`](crate::Engine::health) and the Prometheus exporter's `/healthz` and
//! `/readyz` read it. Every engine that has a health view is known
//! to the process-wide [`registry`] while it lives.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::error;

use crate::api::CallError;
#[cfg(test)]
use crate::api::CallErrorKind;

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
    /// How long a call the engine cannot work without (a receive, a delete, a visibility
    /// change) has failed in a way retrying cannot mend, and nothing else, while one does; the
    /// longest of them. Such a failure is one of
    /// [`CallErrorKind::is_permanent`](crate::CallErrorKind::is_permanent): the queue is gone,
    /// the credentials or the queue's KMS key are refused.
    pub failing_permanently_for: Option<Duration>,
    /// The SQS action that call makes (`ReceiveMessage`, `DeleteMessageBatch`,
    /// `ChangeMessageVisibilityBatch`), while it fails so.
    pub failing_action: Option<&'static str>,
    /// That call's last error, while it fails so.
    pub permanent_failure: Option<CallError>,
    /// Set once the engine gave up on such a failure: its `run` returns
    /// [`Error::GaveUp`](crate::Error::GaveUp).
    pub gave_up: bool,
    /// Set when the engine could not open its queue (its `run` or `consumer` returned the
    /// error at startup): it will not work.
    pub failed_to_open: bool,
}

impl Health {
    /// Whether the engine can work: it opened its queue, none of its receives, deletes and
    /// visibility changes fails in a way retrying cannot mend, and it has not given up. A transient failure
    /// (throttling, a 5xx, the network) does not make it unhealthy: it backs off and retries.
    pub fn is_healthy(&self) -> bool {
        self.failing_permanently_for.is_none() && !self.gave_up && !self.failed_to_open
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
        if let Some(action) = self.failing_action {
            write!(f, " failing_action={action}")?;
        }
        if let Some(failure) = &self.permanent_failure {
            let code = failure.code.as_deref().unwrap_or(failure.kind.as_str());
            write!(f, " permanent_failure={code}")?;
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

/// The calls whose failures the health follows: those the engine cannot work without. Each is
/// followed on its own: a success of one kind of call ends only that kind's failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// `ReceiveMessage`.
    Receive,
    /// `DeleteMessageBatch`: the settlements `Ack` and `Drop`.
    Delete,
    /// `ChangeMessageVisibilityBatch`: the other settlements, and the heartbeat's extensions.
    ChangeVisibility,
}

impl Call {
    const ALL: [Self; 3] = [Self::Receive, Self::Delete, Self::ChangeVisibility];

    /// The SQS action, as errors and logs name it.
    pub(crate) fn action(self) -> &'static str {
        match self {
            Self::Receive => "ReceiveMessage",
            Self::Delete => "DeleteMessageBatch",
            Self::ChangeVisibility => "ChangeMessageVisibilityBatch",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Receive => 0,
            Self::Delete => 1,
            Self::ChangeVisibility => 2,
        }
    }
}

/// The shared state behind a [`HealthHandle`].
#[derive(Debug)]
pub(crate) struct HealthCells {
    queue: String,
    give_up_after: Duration,
    state: Mutex<State>,
    /// Whether some call fails in a way retrying cannot mend: lets a success skip the lock
    /// when nothing fails. Written under the lock.
    failing: AtomicBool,
    /// Cancelled when the engine gives up: its receivers stop.
    gave_up_token: CancellationToken,
}

/// The failures that retrying cannot mend, and what the engine does about them: pure, the
/// clock passed in.
#[derive(Debug)]
struct State {
    phase: Phase,
    last_receive: Option<Instant>,
    consecutive_failures: u32,
    last_failure: Option<CallError>,
    /// Per [`Call`], while it fails in a way retrying cannot mend: since when, and its last
    /// error.
    permanent: [Option<Permanent>; 3],
    gave_up: Option<GaveUp>,
    failed_to_open: bool,
}

/// A kind of call failing in a way retrying cannot mend.
#[derive(Debug, Clone)]
struct Permanent {
    since: Instant,
    error: CallError,
}

/// The failure an engine gave up on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GaveUp {
    /// The call that failed.
    pub(crate) call: Call,
    /// Its last error.
    pub(crate) error: CallError,
    /// How long it had failed so.
    pub(crate) lasted: Duration,
}

/// What a caller does after a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    /// Back off and try again.
    Retry,
    /// The failure could not be mended in the time allowed: the engine gives up.
    GiveUp,
}

impl State {
    fn new() -> Self {
        Self {
            phase: Phase::Starting,
            last_receive: None,
            consecutive_failures: 0,
            last_failure: None,
            permanent: [None, None, None],
            gave_up: None,
            failed_to_open: false,
        }
    }

    /// A `call` succeeded at `now`: its failures, permanent or not, are over.
    fn succeeded(&mut self, call: Call, now: Instant) {
        if call == Call::Receive {
            self.last_receive = Some(now);
            self.consecutive_failures = 0;
            self.last_failure = None;
        }
        self.permanent[call.index()] = None;
    }

    /// A `call` failed with `error` at `now`: retry, or give up because a failure retrying
    /// cannot mend, and no success, has come from that kind of call for `give_up_after`. A
    /// transient failure (throttling, a 5xx, the network) says nothing of whether the call
    /// would work, and leaves such a run as it is: a deleted queue behind a flaky network is
    /// still given up on. A failure of another kind ends the run: the call may work again.
    fn failed(
        &mut self,
        call: Call,
        error: &CallError,
        now: Instant,
        give_up_after: Duration,
    ) -> AfterFailure {
        if call == Call::Receive {
            self.consecutive_failures = self.consecutive_failures.saturating_add(1);
            self.last_failure = Some(error.clone());
        }
        let slot = &mut self.permanent[call.index()];
        if !error.kind.is_permanent() {
            if !error.kind.is_transient() {
                *slot = None;
            }
            return AfterFailure::Retry;
        }
        let since = slot.as_ref().map_or(now, |permanent| permanent.since);
        *slot = Some(Permanent {
            since,
            error: error.clone(),
        });
        let lasted = now.saturating_duration_since(since);
        if lasted < give_up_after {
            return AfterFailure::Retry;
        }
        if self.gave_up.is_none() {
            self.gave_up = Some(GaveUp {
                call,
                error: error.clone(),
                lasted,
            });
        }
        AfterFailure::GiveUp
    }

    /// The call failing in a way retrying cannot mend for the longest, if one does.
    fn longest_permanent(&self) -> Option<(Call, &Permanent)> {
        Call::ALL
            .into_iter()
            .filter_map(|call| Some((call, self.permanent[call.index()].as_ref()?)))
            .min_by_key(|(_, permanent)| permanent.since)
    }

    fn is_failing(&self) -> bool {
        self.permanent.iter().any(Option::is_some)
    }
}

impl HealthCells {
    /// The health of an engine on `queue` that gives up after `give_up_after` of failures
    /// retrying cannot mend, registered in the process-wide [`registry`].
    pub(crate) fn new(queue: &str, give_up_after: Duration) -> Arc<Self> {
        let cells = Arc::new(Self {
            queue: queue.to_owned(),
            give_up_after,
            state: Mutex::new(State::new()),
            failing: AtomicBool::new(false),
            gave_up_token: CancellationToken::new(),
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

    /// Opening the queue failed: the engine stops before it started.
    pub(crate) fn failed_to_open(&self) {
        let mut state = self.state();
        state.failed_to_open = true;
        state.phase = Phase::Stopped;
    }

    /// Shut down.
    pub(crate) fn stopped(&self) {
        self.state().phase = Phase::Stopped;
    }

    /// A receive succeeded: the failures, permanent or not, are over.
    pub(crate) fn receive_succeeded(&self) {
        let mut state = self.state();
        state.succeeded(Call::Receive, Instant::now());
        self.failing.store(state.is_failing(), Ordering::Release);
    }

    /// A receive failed with `error`: whether to retry, or give up because a failure retrying
    /// cannot mend has lasted the time allowed.
    pub(crate) fn receive_failed(&self, error: &CallError) -> AfterFailure {
        self.call_failed(Call::Receive, error)
    }

    /// A batch call of `call` got an answer (whatever its entries'): a failure of that kind
    /// of call that retrying cannot mend is over. Takes no lock while nothing fails so.
    pub(crate) fn call_succeeded(&self, call: Call) {
        if !self.failing.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.state();
        state.succeeded(call, Instant::now());
        self.failing.store(state.is_failing(), Ordering::Release);
    }

    /// A `call` failed with `error`: whether to retry, or give up because a failure retrying
    /// cannot mend has lasted the time allowed. Giving up stops the receivers (see
    /// [`gave_up_token`](Self::gave_up_token)).
    pub(crate) fn call_failed(&self, call: Call, error: &CallError) -> AfterFailure {
        let mut state = self.state();
        let first = state.gave_up.is_none();
        let after = state.failed(call, error, Instant::now(), self.give_up_after);
        self.failing.store(state.is_failing(), Ordering::Release);
        drop(state);
        if after == AfterFailure::GiveUp && first {
            error!(queue = %self.queue, action = call.action(), error = %error, give_up_after = ?self.give_up_after, "failing in a way retrying cannot mend for longer than the engine's give_up_after: giving up");
            self.gave_up_token.cancel();
        }
        after
    }

    /// Cancelled once the engine gives up: what stops its receivers.
    pub(crate) fn gave_up_token(&self) -> &CancellationToken {
        &self.gave_up_token
    }

    /// The failure the engine gave up on.
    pub(crate) fn gave_up(&self) -> Option<GaveUp> {
        self.state().gave_up.clone()
    }

    /// The queue, as it was named.
    pub(crate) fn queue(&self) -> &str {
        &self.queue
    }

    pub(crate) fn snapshot(&self) -> Health {
        let now = Instant::now();
        let state = self.state();
        let longest = state.longest_permanent();
        Health {
            queue: self.queue.clone(),
            phase: state.phase,
            since_last_receive: state
                .last_receive
                .map(|at| now.saturating_duration_since(at)),
            consecutive_failures: state.consecutive_failures,
            last_failure: state.last_failure.clone(),
            failing_permanently_for: longest
                .map(|(_, permanent)| now.saturating_duration_since(permanent.since)),
            failing_action: longest.map(|(call, _)| call.action()),
            permanent_failure: longest.map(|(_, permanent)| permanent.error.clone()),
            gave_up: state.gave_up.is_some(),
            failed_to_open: state.failed_to_open,
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
mod tests;
