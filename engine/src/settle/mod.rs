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

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, warn};

use crate::api::{CallError, CallErrorKind, EntryFailure, EntryResult};
use crate::error::SettleError;
use crate::metrics::Action;
use crate::outcome::Outcome;
use crate::queue::QueueRuntime;
use coalescer::{Batch, Coalescer, CoalescerConfig, Entry, Lane};
use visibility::VisibilityTarget;

/// Who is waiting for an entry's answer, and what to record when it comes.
#[derive(Debug)]
pub(crate) struct Completion {
    tx: Option<oneshot::Sender<Result<(), SettleError>>>,
    outcome: Outcome,
    message_id: Arc<str>,
    /// Until when the message is known to stay invisible; an answer after it is late.
    visible_until: Instant,
}

struct State {
    coalescer: Coalescer<Completion>,
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
}

/// Queues a settlement. It is sent whatever becomes of the returned [`Settlement`].
pub(crate) fn enqueue(queue: &QueueRuntime, request: Request) -> Settlement {
    let (tx, rx) = oneshot::channel();
    let settlement = Settlement {
        rx,
        queue: Arc::clone(&queue.name),
        message_id: Arc::clone(&request.message_id),
    };
    let completion = Completion {
        tx: Some(tx),
        outcome: request.outcome,
        message_id: request.message_id,
        visible_until: request.visible_until,
    };
    let entry = Entry {
        receipt: request.receipt,
        visibility: request.visibility,
        enqueued_at: Instant::now(),
        token: completion,
    };
    let mut state = queue.settler.lock();
    if state.closed {
        drop(state);
        let completion = entry.token;
        answer(
            queue,
            request.lane,
            completion,
            entry.enqueued_at,
            Err(Failure::Stopped),
        );
    } else if state.coalescer.push(request.lane, entry) {
        drop(state);
        queue.settler.wake.notify_one();
    }
    settlement
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
async fn execute(queue: Arc<QueueRuntime>, batch: Batch<Completion>) {
    let lane = batch.lane;
    let action = Action::of_lane(lane);
    let mut entries = batch.entries;
    let mut attempt: u32 = 1;
    loop {
        let result = send(&queue, lane, &entries).await;
        queue.metrics.call(action, result.is_ok());
        let budget_left = attempt < queue.backoff.max_attempts();
        let mut retry = Vec::new();
        match result {
            Ok(results) => {
                let mut results = results.into_iter();
                for entry in entries {
                    let result = results.next().unwrap_or_else(|| {
                        EntryResult::Failed(EntryFailure {
                            code: "MissingEntryResult".into(),
                            sender_fault: false,
                            message: Some(
                                "SQS listed this entry neither as successful nor as failed".into(),
                            ),
                        })
                    });
                    match result {
                        EntryResult::Ok => {
                            answer(&queue, lane, entry.token, entry.enqueued_at, Ok(()))
                        }
                        EntryResult::Failed(failure) if failure.is_transient() && budget_left => {
                            debug!(queue = %queue.name, message_id = %entry.token.message_id, code = %failure.code, "entry failed transiently; sending it again");
                            retry.push(entry);
                        }
                        EntryResult::Failed(failure) => {
                            let failure = if failure.is_transient() {
                                // Out of budget: report it as the call failure it was.
                                Failure::Call {
                                    error: CallError {
                                        kind: CallErrorKind::Server,
                                        message: failure.to_string(),
                                        code: Some(failure.code),
                                    },
                                    attempts: attempt,
                                }
                            } else {
                                Failure::Rejected(failure)
                            };
                            answer(&queue, lane, entry.token, entry.enqueued_at, Err(failure));
                        }
                    }
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
                    answer(&queue, lane, entry.token, entry.enqueued_at, Err(failure));
                }
            }
        }
        if retry.is_empty() {
            break;
        }
        queue.metrics.entries_retried(lane, retry.len());
        tokio::time::sleep(queue.backoff.jittered(attempt)).await;
        attempt += 1;
        entries = retry;
    }
    queue.settler.lock().coalescer.finish(lane);
    queue.settler.wake.notify_one();
}

/// One batch call for `entries`.
async fn send(
    queue: &QueueRuntime,
    lane: Lane,
    entries: &[Entry<Completion>],
) -> Result<Vec<EntryResult>, CallError> {
    match lane {
        Lane::Delete => {
            let handles: Vec<&str> = entries.iter().map(|e| &*e.receipt).collect();
            queue.api.delete_message_batch(&queue.url, &handles).await
        }
        Lane::Visibility => {
            // The seconds are worked out at each send, so a retried entry still ends within its
            // message's 12-hour window.
            let now = Instant::now();
            let pairs: Vec<(&str, u32)> = entries
                .iter()
                .map(|e| {
                    let seconds = e.visibility.map_or(0, |target| target.seconds_at(now).0);
                    (&*e.receipt, seconds)
                })
                .collect();
            queue
                .api
                .change_message_visibility_batch(&queue.url, &pairs)
                .await
        }
    }
}
