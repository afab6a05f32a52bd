//! Settlement: each message's outcome as an entry of a batch call, answered on its own.
//!
//! Per queue, one pure [`state::SettleState`] (the coalescer's lanes, the heartbeat's schedule
//! and the in-flight set, under one lock) and one driver task, [`run`], that does its I/O:
//! it asks the state for the calls due, sends each as its own task, feeds the answers back,
//! and sleeps until the state's next deadline or a wake-up. Handlers' settlements come in
//! through [`enqueue`]; deliveries register with the heartbeat through [`Settler::register`].

pub(crate) mod coalescer;
pub(crate) mod heartbeat;
pub(crate) mod hold;
pub(crate) mod plan;
pub(crate) mod state;
pub(crate) mod visibility;

mod answer;
mod settler;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use tokio::sync::{Notify, OwnedSemaphorePermit, oneshot};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, warn};

use crate::api::{CallError, CallErrorKind, EntryFailure, EntryResult, SqsApi};
use crate::error::SettleError;
use crate::handle::outcome::Outcome;
use crate::health::Call;
use crate::metrics::Action;
use crate::room::held::Slot;
use crate::sqs::batch::drive::{BatchCall, Driven, Due, EntryAnswer, drive, send_per_entry};
use crate::sqs::lane::Lane;
use answer::{ExtensionFailure, Failure, answer, answer_extension};
use coalescer::{Batch, Entry};
use settler::Completion;
pub(crate) use settler::{AnswerHook, Settler, SettlerConfig};
pub(crate) use state::{Answers, DeleteFill};
use state::{Closed, Token};
use visibility::VisibilityTarget;

/// What a delivery asks for when it settles.
pub(crate) struct Request {
    pub(crate) receipt: Arc<str>,
    pub(crate) outcome: Outcome,
    pub(crate) lane: Lane,
    pub(crate) visibility: Option<VisibilityTarget>,
    pub(crate) message_id: Arc<str>,
    /// The delivery's key in the heartbeat's schedule: settling stops its heartbeat.
    pub(crate) key: Option<u64>,
    /// Until when the message is known to stay invisible, if the heartbeat does not know
    /// better.
    pub(crate) visible_until: Instant,
    /// The delivery's place among the messages the engine may hold: kept until SQS answers,
    /// so settlements waiting for a slow SQS hold back the receivers.
    pub(crate) slot: Option<Slot>,
    /// Told the answer once it is recorded.
    pub(crate) on_answer: Option<AnswerHook>,
}

/// Queues a settlement. It is sent whatever becomes of the returned [`Settlement`].
pub(crate) fn enqueue(settler: &Settler, request: Request) -> Settlement {
    let (tx, rx) = oneshot::channel();
    let settlement = Settlement {
        rx,
        queue: Arc::clone(&settler.name),
        message_id: Arc::clone(&request.message_id),
    };
    push(settler, request, Some(tx));
    settlement
}

/// Queues a settlement whose answer nobody waits for: it is sent, recorded and logged as any
/// other, without a channel for the answer.
pub(crate) fn enqueue_detached(settler: &Settler, request: Request) {
    push(settler, request, None);
}

/// With the planted defect
/// [`DuplicateSettledAsOriginal`](crate::testing::Defect::DuplicateSettledAsOriginal) on,
/// `request` with the receipt handle of another delivery of its message the heartbeat keeps.
#[cfg(feature = "testing")]
fn planted_duplicate_defect(
    state: &state::SettleState<Completion>,
    mut request: Request,
) -> Request {
    if crate::testing::defect_on(crate::testing::Defect::DuplicateSettledAsOriginal)
        && let Some(key) = request.key
        && let Some(other) = state.other_receipt(key, &request.message_id)
    {
        request.receipt = other;
    }
    request
}

/// Hands a settlement to the state, or answers it at once when the settlement has stopped.
fn push(settler: &Settler, request: Request, tx: Option<oneshot::Sender<Result<(), SettleError>>>) {
    let enqueued_at = Instant::now();
    let lane = request.lane;
    let mut state = settler.lock();
    #[cfg(feature = "testing")]
    let request = planted_duplicate_defect(&state, request);
    let pushed = state.settle(request.key, lane, |deadline| Entry {
        receipt: request.receipt,
        visibility: request.visibility,
        enqueued_at,
        token: Token::Settle(Completion {
            tx,
            on_answer: request.on_answer,
            outcome: request.outcome,
            message_id: request.message_id,
            visible_until: deadline.unwrap_or(request.visible_until),
            _slot: request.slot,
        }),
    });
    drop(state);
    match pushed {
        Ok(true) => settler.wake.notify_one(),
        Ok(false) => {}
        Err(Closed(entry)) => {
            if let Token::Settle(completion) = entry.token {
                answer(
                    settler,
                    lane,
                    completion,
                    enqueued_at,
                    Err(Failure::Stopped),
                );
            }
        }
    }
}

/// Takes every batch due now and finishes it at once, as if SQS had answered it, without
/// answering its entries; returns the entries taken. For the benches, which run no driver.
#[cfg(feature = "bench")]
pub(crate) fn take_due(settler: &Settler) -> usize {
    let mut state = settler.lock();
    let mut taken = 0;
    for batch in state.poll(Instant::now()) {
        taken += batch.entries.len();
        state.finish(batch.lane, batch.entries.iter().map(|e| &e.receipt));
    }
    taken
}

/// The answer for one message's settlement.
///
/// Resolves when SQS has answered for the message's entry: `Ok(())` means the delete or the
/// visibility change took effect.
///
/// # Errors
///
/// A [`SettleError`]: SQS refused the entry, the call kept failing, the engine had stopped,
/// or ([`SettleError::Unconfirmed`]) SQS answered a delete after the message's visibility
/// deadline, when the delete may have removed nothing and the message may come back.
///
/// # Cancel safety
///
/// The settlement was queued when this value was made. Dropping it does not withdraw the
/// entry: it is sent all the same, and only its answer is lost.
#[derive(Debug)]
pub struct Settlement {
    rx: oneshot::Receiver<Result<(), SettleError>>,
    queue: Arc<str>,
    message_id: Arc<str>,
}

impl Future for Settlement {
    type Output = Result<(), SettleError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        Pin::new(&mut this.rx).poll(cx).map(|answer| {
            // The sender goes away unanswered only when the runtime stops the engine's tasks.
            answer.unwrap_or_else(|_| {
                Err(SettleError::Stopped {
                    queue: this.queue.to_string(),
                    message_id: this.message_id.to_string(),
                })
            })
        })
    }
}

/// The driver of one queue's settlement: sends the batch calls its state asks for (handlers'
/// settlements and the heartbeat's extensions) until it drains ([`Settler::drain`]) and
/// everything pending has been answered.
///
/// Each batch call runs as its own task on `tracker`, so a slow call never holds up the next
/// batch of another lane.
pub(crate) async fn run(settler: Arc<Settler>, tracker: TaskTracker) {
    let name = Arc::clone(&settler.name);
    drive(&SettleDriver { settler, tracker }).await;
    debug!(queue = %name, "settlements flushed");
}

/// A queue's settlement state and its calls, as the batch driver runs them.
struct SettleDriver {
    settler: Arc<Settler>,
    tracker: TaskTracker,
}

impl Driven for SettleDriver {
    type Batch = Batch<Token<Completion>>;

    fn poll(&self, now: Instant) -> Due<Self::Batch> {
        let due = {
            let mut state = self.settler.lock();
            if self.settler.draining().is_cancelled() {
                state.drain();
            }
            let batches = state.poll(now);
            let done = state.close_if_done();
            (
                Due {
                    batches,
                    next: state.next_deadline(),
                    done,
                },
                state.is_idle(),
            )
        };
        let (due, idle) = due;
        if !due.batches.is_empty() {
            self.settler.shrunk.notify_waiters();
        }
        if idle {
            self.settler.idle.notify_waiters();
        }
        due
    }

    fn send(&self, batch: Self::Batch) {
        let settler = &self.settler;
        settler
            .metrics
            .flushed(batch.lane, batch.reason, batch.entries.len());
        let span = tracing::debug_span!("batch", queue = %settler.name, action = Action::of_lane(batch.lane).as_str(), entries = batch.entries.len(), reason = batch.reason.as_str());
        self.tracker
            .spawn(execute(Arc::clone(settler), batch).instrument(span));
    }

    fn wake(&self) -> &Notify {
        &self.settler.wake
    }

    /// Lets the tasks woken with the one that pushed run first: handlers that finish in the
    /// same tick (a receive batch of equal work) then share a call instead of the first entry
    /// going out alone on an idle lane.
    fn after_wake(&self) -> impl Future<Output = ()> + Send {
        tokio::task::yield_now()
    }
}

/// Sends one batch, and again for its entries that failed transiently, under the retry budget.
async fn execute(settler: Arc<Settler>, batch: Batch<Token<Completion>>) {
    let lane = batch.lane;
    let _in_flight = CallInFlight::new(&settler, lane, busy_receipts(lane, &batch.entries));
    let waiters = vec![(); batch.entries.len()];
    let call = SettleCall {
        settler: &settler,
        lane,
        action: Action::of_lane(lane),
        call: match lane {
            Lane::Delete => Call::Delete,
            Lane::Visibility => Call::ChangeVisibility,
        },
    };
    send_per_entry(&call, &settler.backoff, batch.entries, waiters).await;
}

/// The batch calls of one lane of a queue's settlement.
struct SettleCall<'a> {
    settler: &'a Settler,
    lane: Lane,
    action: Action,
    /// The same call, as the engine's health follows it.
    call: Call,
}

impl BatchCall for SettleCall<'_> {
    type Entry = Entry<Token<Completion>>;
    type Waiter = ();

    fn call<'a>(
        &'a self,
        entries: &'a [Self::Entry],
        sent_at: Instant,
    ) -> impl Future<Output = Result<Vec<EntryResult>, CallError>> + Send + 'a {
        // Worked out at each send, so a retried entry still ends within its message's 12-hour
        // window.
        let seconds = visibility_seconds(entries, sent_at);
        async move { send(self.settler, self.lane, entries, &seconds).await }
    }

    fn called(&self, ok: bool, _entries: usize, sent_at: Instant) {
        self.settler.metrics.call(self.action, ok);
        if ok {
            // Lock-free unless a failure retrying cannot mend is on record.
            self.settler.health.call_succeeded(self.call);
            let took = sent_at.elapsed();
            self.settler.round_trip.sample(took);
            let in_flight = self.settler.calls_in_flight.load(Ordering::Relaxed);
            self.settler.calls_round_trip.sample(took, in_flight);
        }
    }

    fn answer(&self, entry: Self::Entry, (): (), answer: EntryAnswer, sent_at: Instant) {
        let failure = match answer {
            EntryAnswer::Applied => None,
            EntryAnswer::Refused(failure) => Some(Failure::Rejected(failure)),
            // Out of budget: report it as the call failure it was.
            EntryAnswer::GaveUp { failure, attempts } => Some(Failure::Call {
                error: CallError::new(CallErrorKind::Server, failure.to_string())
                    .with_code(failure.code),
                attempts,
            }),
            EntryAnswer::CallFailed { error, attempts } => Some(Failure::Call { error, attempts }),
        };
        finish_entry(self.settler, self.lane, entry, sent_at, failure);
    }

    fn entry_retried(&self, entry: &Self::Entry, failure: &EntryFailure) {
        debug!(queue = %self.settler.name, message_id = message_id(&entry.token), code = %failure.code, "entry failed transiently; sending it again");
    }

    fn call_failed(&self, error: &CallError, attempt: u32, again: bool, entries: usize) {
        // Giving up stops the receivers; the settlements still go out.
        self.settler.health.call_failed(self.call, error);
        if error.is_transient() {
            // An overloaded or throttling server: fewer receives in flight until their round
            // trip is measured again.
            self.settler.pressure.mark();
        }
        let (queue, action) = (&self.settler.name, self.action.as_str());
        if again {
            warn!(queue = %queue, action, attempt, error = %error, "batch call failed; retrying");
        } else {
            warn!(queue = %queue, action, attempt, error = %error, entries, "batch call failed; failing its entries");
        }
    }

    fn retrying(&self, entries: usize) {
        self.settler.metrics.entries_retried(self.lane, entries);
    }

    /// One at a time per queue: against an overloaded server, every call that timed out
    /// retried at once would queue behind the calls it abandoned, time out again, and keep
    /// the server busy with work no one waits for.
    fn retry_turn(&self) -> impl Future<Output = Option<OwnedSemaphorePermit>> + Send {
        let turns = Arc::clone(&self.settler.retry_turns);
        async move { turns.acquire_owned().await.ok() }
    }

    /// An extension whose message's 12-hour window has ended by the time it would go out (a
    /// retry after a long brownout): sent, it would ask for no time at all, which makes the
    /// message visible at once, under a handler that may still run. It is not sent.
    fn lapsed(&self, entry: &Self::Entry, now: Instant) -> Option<CallError> {
        let extension = matches!(entry.token, Token::Extend { .. });
        let seconds = entry.visibility.map(|target| target.seconds_at(now).0);
        (extension && seconds == Some(0)).then(|| {
            CallError::new(
                CallErrorKind::Other,
                "the message's 12-hour visibility window ended before the extension went out",
            )
        })
    }
}

/// Tells the state a batch call of `lane` is over when dropped: after its last answer, and
/// also when the task sending it ends early (a panic, a runtime shutting down), so the lane
/// never waits for a call that will not finish.
struct CallInFlight {
    settler: Arc<Settler>,
    lane: Lane,
    /// The receipt handles the call holds busy (visibility lane only).
    receipts: Vec<Arc<str>>,
}

impl CallInFlight {
    fn new(settler: &Arc<Settler>, lane: Lane, receipts: Vec<Arc<str>>) -> Self {
        settler.metrics.batches_in_flight(lane, 1.0);
        settler.calls_in_flight.fetch_add(1, Ordering::Relaxed);
        Self {
            settler: Arc::clone(settler),
            lane,
            receipts,
        }
    }
}

impl Drop for CallInFlight {
    fn drop(&mut self) {
        self.settler.metrics.batches_in_flight(self.lane, -1.0);
        self.settler.calls_in_flight.fetch_sub(1, Ordering::Relaxed);
        let calls = &self.settler.calls_round_trip;
        let mut state = self.settler.lock();
        let backlogged = state.is_backlogged();
        if let Some(rtt) = calls.now() {
            state.round_trip(rtt, calls.queueing());
        }
        state.finish(self.lane, &self.receipts);
        // A longer round trip allows more calls in flight, and the backlog is measured by them.
        let cleared = backlogged && !state.is_backlogged();
        drop(state);
        if cleared {
            self.settler.shrunk.notify_waiters();
        }
        self.settler.wake.notify_one();
    }
}

/// The receipt handles a batch of `lane` keeps busy while its call is in flight: those of the
/// visibility lane, whose changes to one message must go out in order.
fn busy_receipts(lane: Lane, entries: &[Entry<Token<Completion>>]) -> Vec<Arc<str>> {
    match lane {
        Lane::Visibility => entries.iter().map(|e| Arc::clone(&e.receipt)).collect(),
        Lane::Delete => Vec::new(),
    }
}

fn message_id(token: &Token<Completion>) -> &str {
    match token {
        Token::Settle(completion) => &completion.message_id,
        Token::Extend { message_id, .. } => message_id,
    }
}

/// Hands an entry's final answer to whoever waits for it.
fn finish_entry(
    settler: &Settler,
    lane: Lane,
    entry: Entry<Token<Completion>>,
    sent_at: Instant,
    failure: Option<Failure>,
) {
    // The seconds the call sent for it.
    let seconds = entry
        .visibility
        .map_or(0, |target| target.seconds_at(sent_at).0);
    match entry.token {
        Token::Settle(completion) => {
            let result = failure.map_or(Ok(()), Err);
            answer(settler, lane, completion, entry.enqueued_at, result);
        }
        Token::Extend {
            key,
            message_id,
            last,
        } => {
            let result = match failure {
                None => Ok(()),
                Some(Failure::Rejected(failure)) => Err(ExtensionFailure {
                    permanent: !failure.is_transient(),
                    error: failure.to_string(),
                }),
                // A call that failed as a whole, even in a way retrying cannot mend at once
                // (access denied, expired credentials), is tried again until the deadline: it
                // may be mended by then, and the deadline bounds the tries.
                Some(Failure::Call { error, .. }) => Err(ExtensionFailure {
                    permanent: false,
                    error: error.to_string(),
                }),
                Some(Failure::Stopped) => Err(ExtensionFailure {
                    error: "the engine stopped".to_owned(),
                    permanent: true,
                }),
            };
            answer_extension(settler, key, &message_id, last, sent_at, seconds, result);
        }
    }
}

/// The visibility of each entry at `now`, in whole seconds; empty on the delete lane.
fn visibility_seconds(entries: &[Entry<Token<Completion>>], now: Instant) -> Vec<u32> {
    entries
        .iter()
        .filter_map(|e| e.visibility.map(|target| target.seconds_at(now).0))
        .collect()
}

/// The seconds of each entry, or zeros for the delete lane.
fn seconds_or_zero(seconds: &[u32]) -> impl Iterator<Item = u32> + '_ {
    seconds.iter().copied().chain(std::iter::repeat(0))
}

/// One batch call for `entries`.
async fn send(
    settler: &Settler,
    lane: Lane,
    entries: &[Entry<Token<Completion>>],
    seconds: &[u32],
) -> Result<Vec<EntryResult>, CallError> {
    match lane {
        Lane::Delete => {
            let handles: Vec<&str> = entries.iter().map(|e| &*e.receipt).collect();
            settler
                .api
                .delete_message_batch(&settler.url, &handles)
                .await
        }
        Lane::Visibility => {
            let pairs: Vec<(&str, u32)> = entries
                .iter()
                .zip(seconds_or_zero(seconds))
                .map(|(e, seconds)| (&*e.receipt, seconds))
                .collect();
            settler
                .api
                .change_message_visibility_batch(&settler.url, &pairs)
                .await
        }
    }
}

#[cfg(test)]
mod tests;
