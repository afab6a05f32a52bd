//! Settlement: each message's outcome as an entry of a batch call, answered on its own.
//!
//! [`coalescer`] decides when batches go out; this module drives it: it takes entries from
//! settling deliveries, runs the flusher task that sends the batches, retries what failed
//! transiently, and hands each entry's answer back to its [`Settlement`].

pub(crate) mod coalescer;
pub(crate) mod visibility;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use tokio::sync::{Notify, OwnedSemaphorePermit, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, warn};

use crate::api::{CallError, CallErrorKind, EntryFailure, EntryResult};
use crate::caught::caught;
use crate::error::SettleError;
use crate::heartbeat::Extension;
use crate::metrics::Action;
use crate::outcome::Outcome;
use crate::queue::QueueRuntime;
use coalescer::{Batch, Coalescer, CoalescerConfig, Entry, Lane};
use visibility::VisibilityTarget;

/// What an entry is for, and who gets its answer.
#[derive(Debug)]
pub(crate) enum Token {
    /// A handler's settlement.
    Settle(Completion),
    /// A heartbeat's extension of the delivery with this schedule key.
    Extend {
        key: u64,
        message_id: Arc<str>,
        /// It ends at the 12-hour window: the heartbeat stops after it.
        last: bool,
    },
}

impl Token {
    fn message_id(&self) -> &str {
        match self {
            Token::Settle(completion) => &completion.message_id,
            Token::Extend { message_id, .. } => message_id,
        }
    }
}

/// Who is waiting for a settlement's answer, and what to record when it comes.
#[derive(Debug)]
pub(crate) struct Completion {
    tx: Option<oneshot::Sender<Result<(), SettleError>>>,
    outcome: Outcome,
    message_id: Arc<str>,
    /// Until when the message is known to stay invisible; an answer after it is late.
    visible_until: Instant,
    /// Freed with the answer (see [`Request::slot`]).
    _slot: Option<OwnedSemaphorePermit>,
}

struct State {
    coalescer: Coalescer<Token>,
    /// Set when the flusher has stopped: nothing more will be sent.
    closed: bool,
}

/// The settlement side of one queue: the coalescer behind a lock, and the flusher's wake-up.
pub(crate) struct Settler {
    state: Mutex<State>,
    wake: Notify,
}

impl Settler {
    pub(crate) fn new(config: CoalescerConfig) -> Self {
        Self {
            state: Mutex::new(State {
                coalescer: Coalescer::new(config),
                closed: false,
            }),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The lock guards plain data and no code under it panics; a poisoned lock still holds
        // consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a delivery asks for when it settles.
pub(crate) struct Request {
    pub(crate) receipt: Arc<str>,
    pub(crate) outcome: Outcome,
    pub(crate) lane: Lane,
    pub(crate) visibility: Option<VisibilityTarget>,
    pub(crate) message_id: Arc<str>,
    pub(crate) visible_until: Instant,
    /// The delivery's place among the messages the engine may hold: kept until SQS answers,
    /// so settlements waiting for a slow SQS hold back the receivers.
    pub(crate) slot: Option<OwnedSemaphorePermit>,
}

/// Queues a settlement. It is sent whatever becomes of the returned [`Settlement`].
pub(crate) fn enqueue(queue: &QueueRuntime, request: Request) -> Settlement {
    let (tx, rx) = oneshot::channel();
    let settlement = Settlement {
        rx,
        queue: Arc::clone(&queue.name),
        message_id: Arc::clone(&request.message_id),
    };
    push(queue, request, Some(tx));
    settlement
}

/// Queues a settlement whose answer nobody waits for: it is sent, recorded and logged as any
/// other, without a channel for the answer.
pub(crate) fn enqueue_detached(queue: &QueueRuntime, request: Request) {
    push(queue, request, None);
}

/// Pushes a settlement's entry into the coalescer, or answers it at once when the flusher has
/// stopped.
fn push(
    queue: &QueueRuntime,
    request: Request,
    tx: Option<oneshot::Sender<Result<(), SettleError>>>,
) {
    let completion = Completion {
        tx,
        outcome: request.outcome,
        message_id: request.message_id,
        visible_until: request.visible_until,
        _slot: request.slot,
    };
    let entry = Entry {
        receipt: request.receipt,
        visibility: request.visibility,
        enqueued_at: Instant::now(),
        token: Token::Settle(completion),
    };
    let mut state = queue.settler.lock();
    if state.closed {
        drop(state);
        if let Token::Settle(completion) = entry.token {
            answer(
                queue,
                request.lane,
                completion,
                entry.enqueued_at,
                Err(Failure::Stopped),
            );
        }
    } else if state.coalescer.push(request.lane, entry) {
        drop(state);
        queue.settler.wake.notify_one();
    }
}

/// Takes every batch due now and finishes it at once, as if SQS had answered it, without
/// answering its entries; returns the entries taken. For the benches, which run no flusher.
#[cfg(feature = "bench")]
pub(crate) fn take_due(queue: &QueueRuntime) -> usize {
    let now = Instant::now();
    let mut state = queue.settler.lock();
    let mut taken = 0;
    while let Some(batch) = state.coalescer.poll_batch(now) {
        taken += batch.entries.len();
        state
            .coalescer
            .finish(batch.lane, batch.entries.iter().map(|e| &e.receipt));
    }
    taken
}

/// Queues heartbeat extensions on the visibility lane, with one wake-up for all of them.
/// Extensions asked for after the flusher stopped are dropped: nothing is in flight by then.
pub(crate) fn enqueue_extensions(queue: &QueueRuntime, extensions: Vec<Extension>) {
    if extensions.is_empty() {
        return;
    }
    let now = Instant::now();
    let mut state = queue.settler.lock();
    if state.closed {
        return;
    }
    let mut wake = false;
    for extension in extensions {
        wake |= state.coalescer.push(
            Lane::Visibility,
            Entry {
                receipt: extension.receipt,
                visibility: Some(VisibilityTarget {
                    delay: extension.extension,
                    window_end: extension.window_end,
                }),
                enqueued_at: now,
                token: Token::Extend {
                    key: extension.key,
                    message_id: extension.message_id,
                    last: extension.last,
                },
            },
        );
    }
    drop(state);
    if wake {
        queue.settler.wake.notify_one();
    }
}

/// The answer for one message's settlement.
///
/// Resolves when SQS has answered for the message's entry: `Ok(())` means the delete or the
/// visibility change took effect.
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

/// Why an entry's settlement failed, before the queue and message id are attached.
enum Failure {
    Rejected(EntryFailure),
    Call { error: CallError, attempts: u32 },
    Stopped,
}

/// Answers one entry: resolves its settlement, records it, logs a failure.
fn answer(
    queue: &QueueRuntime,
    lane: Lane,
    mut completion: Completion,
    enqueued_at: Instant,
    result: Result<(), Failure>,
) {
    let now = Instant::now();
    let latency = now.saturating_duration_since(enqueued_at).as_secs_f64();
    let ok = result.is_ok();
    // The message is no longer held once its settlement is answered.
    queue.metrics.in_flight(-1.0);
    queue
        .metrics
        .settled(&completion.outcome, ok, lane, latency);
    let result = match result {
        Ok(()) => {
            if now > completion.visible_until {
                queue.metrics.late();
                warn!(
                    queue = %queue.name,
                    message_id = %completion.message_id,
                    outcome = completion.outcome.as_str(),
                    "settlement applied after the message's visibility deadline: it may have been delivered again"
                );
            }
            Ok(())
        }
        Err(failure) => {
            let queue_name = queue.name.to_string();
            let message_id = completion.message_id.to_string();
            let error = match failure {
                Failure::Rejected(failure) => SettleError::Rejected {
                    queue: queue_name,
                    message_id,
                    code: failure.code,
                    detail: failure.message,
                },
                Failure::Call { error, attempts } => SettleError::Failed {
                    queue: queue_name,
                    message_id,
                    attempts,
                    source: error,
                },
                Failure::Stopped => SettleError::Stopped {
                    queue: queue_name,
                    message_id,
                },
            };
            warn!(
                queue = %queue.name,
                message_id = error.message_id(),
                outcome = completion.outcome.as_str(),
                error = %error,
                "settlement failed"
            );
            Err(error)
        }
    };
    if let Some(tx) = completion.tx.take() {
        // The receiver may be gone: the entry was sent all the same.
        let _ = tx.send(result);
    }
}

/// Records the answer for a heartbeat's extension.
fn answer_extension(
    queue: &QueueRuntime,
    key: u64,
    message_id: &str,
    last: bool,
    sent_at: Instant,
    seconds: u32,
    result: Result<(), String>,
) {
    let Some(heartbeat) = &queue.heartbeat else {
        return;
    };
    match result {
        Ok(()) => {
            queue.metrics.extension(true);
            heartbeat.extended(key, sent_at, seconds, last);
            if last {
                warn!(
                    queue = %queue.name,
                    message_id,
                    seconds,
                    "last visibility extension: it ends 12 hours after the receive, as SQS allows no more"
                );
            }
        }
        Err(error) => {
            if !heartbeat.failed(key) {
                // Settled while its extension was in flight: the settlement decides.
                debug!(queue = %queue.name, message_id, error = %error, "extension of a settled message failed");
                return;
            }
            queue.metrics.extension(false);
            warn!(
                queue = %queue.name,
                message_id,
                error = %error,
                "visibility extension failed: the message may be delivered again before it is settled"
            );
        }
    }
}

/// Sends batches until `drain` is cancelled and everything pending has been answered.
///
/// Each batch call runs as its own task on `tracker`, so a slow call never holds up the next
/// batch of another lane.
pub(crate) async fn run_flusher(
    queue: Arc<QueueRuntime>,
    drain: CancellationToken,
    tracker: TaskTracker,
) {
    loop {
        let now = Instant::now();
        let mut batches = Vec::new();
        let (deadline, draining, done) = {
            let mut state = queue.settler.lock();
            if drain.is_cancelled() {
                state.coalescer.drain();
            }
            while let Some(batch) = state.coalescer.poll_batch(now) {
                batches.push(batch);
            }
            let draining = state.coalescer.is_draining();
            let done = draining && batches.is_empty() && state.coalescer.is_idle();
            if done {
                state.closed = true;
            }
            (state.coalescer.next_deadline(), draining, done)
        };
        for batch in batches {
            queue
                .metrics
                .flushed(batch.lane, batch.reason, batch.entries.len());
            let span = tracing::debug_span!("batch", queue = %queue.name, action = Action::of_lane(batch.lane).as_str(), entries = batch.entries.len(), reason = batch.reason.as_str());
            tracker.spawn(execute(Arc::clone(&queue), batch).instrument(span));
        }
        if done {
            debug!(queue = %queue.name, "settlements flushed");
            return;
        }
        tokio::select! {
            () = queue.settler.wake.notified() => {}
            () = sleep_until_or_forever(deadline) => {}
            () = drain.cancelled(), if !draining => {}
        }
    }
}

async fn sleep_until_or_forever(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Sends one batch, and again for its entries that failed transiently, under the retry budget.
async fn execute(queue: Arc<QueueRuntime>, batch: Batch<Token>) {
    let lane = batch.lane;
    let action = Action::of_lane(lane);
    let _in_flight = CallInFlight {
        queue: Arc::clone(&queue),
        lane,
        receipts: busy_receipts(lane, &batch.entries),
    };
    let mut entries = batch.entries;
    if lane == Lane::Visibility {
        drop_stale_extensions(&queue, &mut entries);
    }
    let mut attempt: u32 = 1;
    while !entries.is_empty() {
        let sent_at = Instant::now();
        let seconds = visibility_seconds(&entries, sent_at);
        let result = caught(send(&queue, lane, &entries, &seconds)).await;
        queue.metrics.call(action, result.is_ok());
        let budget_left = attempt < queue.backoff.max_attempts();
        let mut retry = Vec::new();
        match result {
            Ok(results) => {
                let mut results = results.into_iter();
                for (entry, seconds) in entries.into_iter().zip(seconds_or_zero(&seconds)) {
                    let result = results.next().unwrap_or_else(|| {
                        EntryResult::Failed(EntryFailure {
                            code: "MissingEntryResult".into(),
                            sender_fault: false,
                            message: Some(
                                "SQS listed this entry neither as successful nor as failed".into(),
                            ),
                        })
                    });
                    let failure = match result {
                        EntryResult::Ok => None,
                        EntryResult::Failed(failure) if failure.is_transient() && budget_left => {
                            debug!(queue = %queue.name, message_id = entry.token.message_id(), code = %failure.code, "entry failed transiently; sending it again");
                            retry.push(entry);
                            continue;
                        }
                        EntryResult::Failed(failure) if failure.is_transient() => {
                            // Out of budget: report it as the call failure it was.
                            Some(Failure::Call {
                                error: CallError {
                                    kind: CallErrorKind::Server,
                                    message: failure.to_string(),
                                    code: Some(failure.code),
                                },
                                attempts: attempt,
                            })
                        }
                        EntryResult::Failed(failure) => Some(Failure::Rejected(failure)),
                    };
                    finish_entry(&queue, lane, entry, sent_at, seconds, failure);
                }
            }
            Err(error) if error.is_transient() && budget_left => {
                warn!(queue = %queue.name, action = action.as_str(), attempt, error = %error, "batch call failed; retrying");
                retry = entries;
            }
            Err(error) => {
                warn!(queue = %queue.name, action = action.as_str(), attempt, error = %error, entries = entries.len(), "batch call failed; failing its entries");
                for entry in entries {
                    let failure = Failure::Call {
                        error: error.clone(),
                        attempts: attempt,
                    };
                    finish_entry(&queue, lane, entry, sent_at, 0, Some(failure));
                }
            }
        }
        if !retry.is_empty() {
            queue.metrics.entries_retried(lane, retry.len());
            tokio::time::sleep(queue.backoff.jittered(attempt)).await;
            attempt += 1;
        }
        entries = retry;
    }
}

/// Tells the coalescer a batch call of `lane` is over when dropped: after its last answer, and
/// also when the task sending it ends early (a panic, a runtime shutting down), so the lane
/// never waits for a call that will not finish.
struct CallInFlight {
    queue: Arc<QueueRuntime>,
    lane: Lane,
    /// The receipt handles the call holds busy (visibility lane only).
    receipts: Vec<Arc<str>>,
}

impl Drop for CallInFlight {
    fn drop(&mut self) {
        self.queue
            .settler
            .lock()
            .coalescer
            .finish(self.lane, &self.receipts);
        self.queue.settler.wake.notify_one();
    }
}

/// The receipt handles a batch of `lane` keeps busy while its call is in flight: those of the
/// visibility lane, whose changes to one message must go out in order.
fn busy_receipts(lane: Lane, entries: &[Entry<Token>]) -> Vec<Arc<str>> {
    match lane {
        Lane::Visibility => entries.iter().map(|e| Arc::clone(&e.receipt)).collect(),
        Lane::Delete => Vec::new(),
    }
}

/// Takes out the extensions of deliveries settled (or dropped) since the heartbeat asked for
/// them. The settlement decides a settled message's visibility: an extension sent after a
/// `retry_after(d)` would reset it to the full timeout and bring the message back before `d`.
///
/// Checked when the batch is about to go out, with its receipt handles already marked busy:
/// a delivery still tracked here can only settle after this call is answered, so its
/// settlement's entry goes out after the extension, never before it.
fn drop_stale_extensions(queue: &QueueRuntime, entries: &mut Vec<Entry<Token>>) {
    let Some(heartbeat) = &queue.heartbeat else {
        return;
    };
    entries.retain(|entry| match &entry.token {
        Token::Extend { key, .. } => heartbeat.is_tracked(*key),
        Token::Settle(_) => true,
    });
}

/// Hands an entry's final answer to whoever waits for it.
fn finish_entry(
    queue: &QueueRuntime,
    lane: Lane,
    entry: Entry<Token>,
    sent_at: Instant,
    seconds: u32,
    failure: Option<Failure>,
) {
    match entry.token {
        Token::Settle(completion) => {
            let result = failure.map_or(Ok(()), Err);
            answer(queue, lane, completion, entry.enqueued_at, result);
        }
        Token::Extend {
            key,
            message_id,
            last,
        } => {
            let result = match failure {
                None => Ok(()),
                Some(Failure::Rejected(failure)) => Err(failure.to_string()),
                Some(Failure::Call { error, .. }) => Err(error.to_string()),
                Some(Failure::Stopped) => Err("the engine stopped".to_owned()),
            };
            answer_extension(queue, key, &message_id, last, sent_at, seconds, result);
        }
    }
}

/// The visibility of each entry at `now`, in whole seconds; empty on the delete lane. Worked
/// out at each send, so a retried entry still ends within its message's 12-hour window.
fn visibility_seconds(entries: &[Entry<Token>], now: Instant) -> Vec<u32> {
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
    queue: &QueueRuntime,
    lane: Lane,
    entries: &[Entry<Token>],
    seconds: &[u32],
) -> Result<Vec<EntryResult>, CallError> {
    match lane {
        Lane::Delete => {
            let handles: Vec<&str> = entries.iter().map(|e| &*e.receipt).collect();
            queue.api.delete_message_batch(&queue.url, &handles).await
        }
        Lane::Visibility => {
            let pairs: Vec<(&str, u32)> = entries
                .iter()
                .zip(seconds_or_zero(seconds))
                .map(|(e, seconds)| (&*e.receipt, seconds))
                .collect();
            queue
                .api
                .change_message_visibility_batch(&queue.url, &pairs)
                .await
        }
    }
}

#[cfg(test)]
mod tests {
    //! The driver's retry rules, against a scripted stand-in for SQS on a paused clock. What
    //! SQS itself does is proven against LocalStack in `tests/`.

    use std::time::Duration;

    use super::*;
    use crate::backoff::Backoff;
    use crate::metrics::StatsCells;
    use crate::queue::OpenOptions;
    use crate::stand_in::StandIn;

    async fn queue(api: Arc<StandIn>) -> Arc<QueueRuntime> {
        open(api, None).await
    }

    /// A queue with a 30 s visibility timeout and the heartbeat on.
    async fn queue_with_heartbeat(api: Arc<StandIn>) -> Arc<QueueRuntime> {
        open(api, Some(None)).await
    }

    async fn open(api: Arc<StandIn>, heartbeat: Option<Option<Duration>>) -> Arc<QueueRuntime> {
        let (queue, _) = QueueRuntime::open(
            Arc::new(api),
            OpenOptions {
                queue: "q".into(),
                visibility_timeout: heartbeat.map(|_| 30),
                backoff: Backoff::new(Duration::from_millis(100), Duration::from_secs(1), 4),
                coalescer: CoalescerConfig {
                    max_batch: 10,
                    max_wait: Duration::from_millis(5),
                    max_in_flight: 4,
                },
                heartbeat,
                redrive: None,
                create_if_missing: false,
            },
            Arc::new(StatsCells::default()),
        )
        .await
        .expect("opens");
        Arc::new(queue)
    }

    fn request(receipt: &str, outcome: Outcome) -> Request {
        let (lane, visibility) = match outcome {
            Outcome::Ack | Outcome::Drop => (Lane::Delete, None),
            Outcome::Retry => (Lane::Visibility, Some(Duration::ZERO)),
            Outcome::RetryAfter(d) => (Lane::Visibility, Some(d)),
        };
        Request {
            receipt: Arc::from(receipt),
            outcome,
            lane,
            visibility: visibility.map(|delay| VisibilityTarget {
                delay,
                window_end: Instant::now() + visibility::MAX_VISIBILITY,
            }),
            message_id: Arc::from(format!("id-{receipt}")),
            visible_until: Instant::now() + Duration::from_secs(30),
            slot: None,
        }
    }

    /// Runs a flusher over what is queued already until everything is sent and answered.
    async fn flush(queue: &Arc<QueueRuntime>) {
        let drain = CancellationToken::new();
        let tracker = TaskTracker::new();
        tracker.spawn(run_flusher(
            Arc::clone(queue),
            drain.clone(),
            tracker.clone(),
        ));
        drain.cancel();
        tracker.close();
        tokio::time::timeout(Duration::from_secs(60), tracker.wait())
            .await
            .expect("every queued entry is sent and answered");
    }

    /// Starts a flusher, settles `requests` at once, drains, and returns their answers.
    async fn settle_all(
        queue: &Arc<QueueRuntime>,
        requests: Vec<Request>,
    ) -> Vec<Result<(), SettleError>> {
        let drain = CancellationToken::new();
        let tracker = TaskTracker::new();
        tracker.spawn(run_flusher(
            Arc::clone(queue),
            drain.clone(),
            tracker.clone(),
        ));
        let settlements: Vec<_> = requests.into_iter().map(|r| enqueue(queue, r)).collect();
        let mut answers = Vec::new();
        for settlement in settlements {
            answers.push(settlement.await);
        }
        drain.cancel();
        tracker.close();
        tracker.wait().await;
        answers
    }

    fn throttled() -> CallError {
        CallError::new(CallErrorKind::Throttled, "slow down")
    }

    fn failed(code: &str, sender_fault: bool) -> EntryResult {
        EntryResult::Failed(EntryFailure {
            code: code.into(),
            sender_fault,
            message: None,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_call_is_retried_after_a_backoff_and_then_succeeds() {
        let api = StandIn::scripted(vec![Err(throttled()), Err(throttled())]);
        let queue = queue(Arc::clone(&api)).await;
        let answers = settle_all(&queue, vec![request("a", Outcome::Ack)]).await;
        assert!(answers[0].is_ok(), "{answers:?}");
        assert_eq!(api.calls().len(), 3);
        let stats = queue.metrics_stats();
        assert_eq!(stats.delete_message_batch.failed, 2);
        assert_eq!(stats.delete_message_batch.ok, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_keeps_failing_fails_each_entry_once_the_budget_is_spent() {
        let api = StandIn::scripted((0..10).map(|_| Err(throttled())).collect());
        let queue = queue(Arc::clone(&api)).await;
        let started = Instant::now();
        let answers = settle_all(
            &queue,
            vec![request("a", Outcome::Ack), request("b", Outcome::Ack)],
        )
        .await;
        assert_eq!(api.calls().len(), 4, "the budget is four attempts");
        for answer in &answers {
            assert!(
                matches!(answer, Err(SettleError::Failed { attempts: 4, .. })),
                "{answer:?}"
            );
        }
        assert!(
            started.elapsed() <= Duration::from_millis(100 + 200 + 400),
            "the waits stay under the backoff ceilings"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_call_failure_is_not_retried() {
        let api = StandIn::scripted(vec![Err(CallError::new(CallErrorKind::AccessDenied, "no"))]);
        let queue = queue(Arc::clone(&api)).await;
        let answers = settle_all(&queue, vec![request("a", Outcome::Ack)]).await;
        assert_eq!(api.calls().len(), 1);
        assert!(matches!(
            answers[0],
            Err(SettleError::Failed { attempts: 1, .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_entries_that_failed_transiently_are_sent_again() {
        let api = StandIn::scripted(vec![Ok(vec![
            EntryResult::Ok,
            failed("InternalError", false),
            failed("ReceiptHandleIsInvalid", false),
        ])]);
        let queue = queue(Arc::clone(&api)).await;
        let answers = settle_all(
            &queue,
            vec![
                request("a", Outcome::Ack),
                request("b", Outcome::Ack),
                request("c", Outcome::Ack),
            ],
        )
        .await;
        assert_eq!(api.calls(), vec![vec!["a", "b", "c"], vec!["b"]]);
        assert!(answers[0].is_ok());
        assert!(answers[1].is_ok(), "retried and applied");
        assert!(
            matches!(&answers[2], Err(SettleError::Rejected { code, .. }) if code == "ReceiptHandleIsInvalid"),
            "{:?}",
            answers[2]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn visibility_entries_carry_their_delay_in_whole_seconds_rounded_up() {
        let api = StandIn::scripted(Vec::new());
        let queue = queue(Arc::clone(&api)).await;
        settle_all(
            &queue,
            vec![
                request("a", Outcome::Retry),
                request("b", Outcome::RetryAfter(Duration::from_millis(2_100))),
            ],
        )
        .await;
        assert_eq!(api.calls(), vec![vec!["a=0", "b=3"]]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_settlement_after_the_engine_stopped_fails_at_once() {
        let api = StandIn::scripted(Vec::new());
        let queue = queue(Arc::clone(&api)).await;
        settle_all(&queue, Vec::new()).await;
        let answer = enqueue(&queue, request("late", Outcome::Ack)).await;
        assert!(
            matches!(answer, Err(SettleError::Stopped { .. })),
            "{answer:?}"
        );
        assert!(api.calls().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_heartbeat_extension_asked_for_before_a_retry_after_never_undoes_it() {
        let api = StandIn::scripted(Vec::new());
        let queue = queue_with_heartbeat(Arc::clone(&api)).await;
        let heartbeat = queue.heartbeat.as_ref().expect("the heartbeat is on");
        let start = Instant::now();
        let key = heartbeat.register(
            Arc::from("r"),
            Arc::from("id-r"),
            start + Duration::from_secs(30),
            start + visibility::MAX_VISIBILITY,
        );
        // The heartbeat takes the extension due, and before it queues it, the handler
        // settles: its retry_after goes first.
        tokio::time::advance(Duration::from_secs(24)).await;
        let due = heartbeat.poll_due(Instant::now());
        assert_eq!(due.len(), 1);
        assert!(heartbeat.deregister(key).is_some());
        let settlement = enqueue(
            &queue,
            request("r", Outcome::RetryAfter(Duration::from_secs(100))),
        );
        enqueue_extensions(&queue, due);
        flush(&queue).await;
        assert!(settlement.await.is_ok());
        assert_eq!(
            api.calls(),
            vec![vec!["r=100"]],
            "the extension of a settled message is not sent after its retry_after"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_extension_queued_before_the_settlement_goes_first_or_not_at_all() {
        let api = StandIn::scripted(Vec::new());
        let queue = queue_with_heartbeat(Arc::clone(&api)).await;
        let heartbeat = queue.heartbeat.as_ref().expect("the heartbeat is on");
        let start = Instant::now();
        let key = heartbeat.register(
            Arc::from("r"),
            Arc::from("id-r"),
            start + Duration::from_secs(30),
            start + visibility::MAX_VISIBILITY,
        );
        tokio::time::advance(Duration::from_secs(24)).await;
        enqueue_extensions(&queue, heartbeat.poll_due(Instant::now()));
        assert!(heartbeat.deregister(key).is_some());
        let settlement = enqueue(
            &queue,
            request("r", Outcome::RetryAfter(Duration::from_secs(100))),
        );
        flush(&queue).await;
        assert!(settlement.await.is_ok());
        assert_eq!(api.calls().last(), Some(&vec!["r=100".to_owned()]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_call_that_panics_fails_its_entries_and_frees_its_lane() {
        let api = StandIn::panicking();
        let queue = queue(Arc::clone(&api)).await;
        let answers = tokio::time::timeout(
            Duration::from_secs(60),
            settle_all(
                &queue,
                vec![
                    request("a", Outcome::Ack),
                    request("b", Outcome::Ack),
                    request("c", Outcome::Retry),
                ],
            ),
        )
        .await
        .expect("the flusher drains: a panicking call does not hold its lane");
        for answer in &answers {
            assert!(
                matches!(answer, Err(SettleError::Failed { source, attempts: 1, .. }) if source.message.contains("panicked")),
                "{answer:?}"
            );
        }
        let stats = queue.metrics_stats();
        assert_eq!(stats.delete_message_batch.failed, 1);
        assert_eq!(stats.change_message_visibility_batch.failed, 1);
        let state = queue.settler.lock();
        assert_eq!(state.coalescer.in_flight(Lane::Delete), 0);
        assert_eq!(state.coalescer.in_flight(Lane::Visibility), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_settlement_is_sent_all_the_same() {
        let api = StandIn::scripted(Vec::new());
        let queue = queue(Arc::clone(&api)).await;
        let drain = CancellationToken::new();
        let tracker = TaskTracker::new();
        tracker.spawn(run_flusher(
            Arc::clone(&queue),
            drain.clone(),
            tracker.clone(),
        ));
        drop(enqueue(&queue, request("a", Outcome::Ack)));
        drain.cancel();
        tracker.close();
        tracker.wait().await;
        assert_eq!(api.calls(), vec![vec!["a"]]);
        assert_eq!(queue.metrics_stats().acked.ok, 1);
    }
}
