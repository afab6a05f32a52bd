//! The settlement side of one queue: its pure state behind one lock, the driver's wake-up,
//! and what the driver's calls need; and who waits for each settlement's answer.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{Notify, Semaphore, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::coalescer::CoalescerConfig;
use super::heartbeat::HeartbeatConfig;
use super::hold;
use super::state::{DeleteFill, SettleState};
use crate::api::SqsApi;
use crate::error::SettleError;
use crate::handle::outcome::Outcome;
use crate::health::HealthCells;
use crate::metrics::QueueMetrics;
use crate::room::held::Slot;
use crate::sqs::backoff::Backoff;
use crate::sqs::pressure::Pressure;
use crate::sqs::round_trip::{LoadedRoundTrip, RoundTrip};

/// Called with a settlement's answer (`true`: SQS applied it, and for a delete, answered
/// before the message's visibility deadline) and the message's visibility deadline as last
/// known, after the answer is recorded: how a FIFO group learns that its turn may pass on.
pub(crate) struct AnswerHook(pub(crate) Box<dyn FnOnce(bool, Instant) + Send + Sync>);

impl std::fmt::Debug for AnswerHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnswerHook")
    }
}

/// Who is waiting for a settlement's answer, and what to record when it comes.
#[derive(Debug)]
pub(crate) struct Completion {
    pub(super) tx: Option<oneshot::Sender<Result<(), SettleError>>>,
    pub(super) on_answer: Option<AnswerHook>,
    pub(super) outcome: Outcome,
    pub(super) message_id: Arc<str>,
    /// Until when the message is known to stay invisible; an answer after it is late.
    pub(super) visible_until: Instant,
    /// Freed with the answer (see [`Request::slot`](super::Request::slot)).
    pub(super) _slot: Option<Slot>,
}

/// The settlement side of one queue: its state behind one lock, the driver's wake-up, and what
/// the driver's calls need.
pub(crate) struct Settler {
    pub(super) name: Arc<str>,
    pub(super) url: String,
    pub(super) api: Arc<dyn SqsApi>,
    pub(super) backoff: Backoff,
    pub(super) metrics: Arc<QueueMetrics>,
    /// The queue's round trip, which the batch calls feed too (see [`RoundTrip`]).
    pub(super) round_trip: Arc<RoundTrip>,
    /// The batch calls' own round trip, now and unloaded: how many of them are worth having
    /// in flight.
    pub(super) calls_round_trip: LoadedRoundTrip,
    /// Batch calls in flight, both lanes.
    pub(super) calls_in_flight: AtomicUsize,
    pub(super) state: Mutex<SettleState<Completion>>,
    pub(super) wake: Notify,
    /// Told whenever the settlement backlog shrinks: batches go out, a delivery dropped
    /// unsettled takes its pending extension out, more calls are allowed in flight. Receivers
    /// waiting for the backlog to clear look again.
    pub(super) shrunk: Notify,
    /// Told whenever the driver finds nothing pending and nothing in flight.
    pub(super) idle: Notify,
    /// Told how the batch calls fare: one failing in a way retrying cannot mend makes the
    /// engine unhealthy, and in time makes it give up.
    pub(super) health: Arc<HealthCells>,
    /// Where a batch call that failed in a way a retry may mend is counted, for the
    /// receivers to see.
    pub(super) pressure: Arc<Pressure>,
    /// The one turn a batch call that got no answer takes to be made again (see
    /// [`BatchCall::retry_turn`](crate::sqs::batch::drive::BatchCall::retry_turn)).
    pub(super) retry_turns: Arc<Semaphore>,
    /// What keeps the settlement open: the last hold released drains it.
    pub(crate) holds: Arc<hold::Holds>,
    /// Cancelled once the settlement drains (see [`drain`](Self::drain)).
    drain: CancellationToken,
}

/// What a queue's settlement needs to know.
pub(crate) struct SettlerConfig {
    pub(crate) name: Arc<str>,
    pub(crate) url: String,
    pub(crate) api: Arc<dyn SqsApi>,
    pub(crate) backoff: Backoff,
    pub(crate) metrics: Arc<QueueMetrics>,
    pub(crate) coalescer: CoalescerConfig,
    /// `None` with the heartbeat off.
    pub(crate) heartbeat: Option<HeartbeatConfig>,
    /// Where the batch calls' durations go.
    pub(crate) round_trip: Arc<RoundTrip>,
    /// What an idle delete lane does with a partial batch.
    pub(crate) delete_fill: DeleteFill,
    /// The engine's health, which the batch calls feed.
    pub(crate) health: Arc<HealthCells>,
    /// Shared with the queue's receivers.
    pub(crate) pressure: Arc<Pressure>,
}

impl Settler {
    pub(crate) fn new(config: SettlerConfig) -> Self {
        Self {
            name: config.name,
            url: config.url,
            api: config.api,
            backoff: config.backoff,
            metrics: config.metrics,
            round_trip: config.round_trip,
            calls_round_trip: LoadedRoundTrip::default(),
            calls_in_flight: AtomicUsize::new(0),
            state: Mutex::new(SettleState::new(
                config.coalescer,
                config.heartbeat,
                config.delete_fill,
            )),
            wake: Notify::new(),
            shrunk: Notify::new(),
            idle: Notify::new(),
            health: config.health,
            pressure: config.pressure,
            retry_turns: Arc::new(Semaphore::new(1)),
            holds: Arc::default(),
            drain: CancellationToken::new(),
        }
    }

    /// Drains the settlement: from now on every pending entry goes out at once and nothing
    /// more is extended; its driver stops once every call is answered, and a settlement made
    /// after that is refused.
    pub(crate) fn drain(&self) {
        self.drain.cancel();
        self.wake.notify_one();
    }

    /// Cancelled once the settlement drains.
    pub(crate) fn draining(&self) -> &CancellationToken {
        &self.drain
    }

    /// Waits while more settlements wait to be sent than the calls allowed in flight carry,
    /// so that a consumer whose settlement falls behind (a busy CPU, a throttled SQS)
    /// receives no faster than it settles, instead of queueing settlements without bound.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn until_not_backlogged(&self) {
        loop {
            let shrunk = self.shrunk.notified();
            tokio::pin!(shrunk);
            shrunk.as_mut().enable();
            if !self.lock().is_backlogged() {
                return;
            }
            shrunk.await;
        }
    }

    /// Waits until nothing is pending and no call is in flight: every settlement queued
    /// before it returns is sent and answered, its retries included, however long its calls
    /// take.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    #[cfg(feature = "ruststream")]
    pub(crate) async fn until_idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.lock().is_idle() {
                return;
            }
            idle.await;
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, SettleState<Completion>> {
        // The lock guards plain data and no code under it panics; a poisoned lock still holds
        // consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts keeping a delivery invisible until `deadline`, when the heartbeat is on. Returns
    /// its key in the heartbeat's schedule.
    pub(crate) fn register(
        &self,
        receipt: Arc<str>,
        message_id: Arc<str>,
        deadline: Instant,
        window_end: Instant,
    ) -> Option<u64> {
        let (key, wake) = self
            .lock()
            .register(receipt, message_id, deadline, window_end);
        if wake {
            self.wake.notify_one();
        }
        key
    }

    /// Stops keeping a delivery invisible, when it is dropped unsettled; returns its deadline
    /// as last known. Never awaits: safe from `Drop`.
    pub(crate) fn forget(&self, key: u64) -> Option<Instant> {
        let mut state = self.lock();
        let backlogged = state.is_backlogged();
        let deadline = state.forget(key);
        let cleared = backlogged && !state.is_backlogged();
        drop(state);
        if cleared {
            self.shrunk.notify_waiters();
        }
        deadline
    }
}
