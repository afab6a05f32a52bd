//! How an answer settles: an entry's result resolves its settlement, is counted and logged
//! (a delete answered after the message's visibility deadline is unconfirmed); an extension's
//! result moves the heartbeat's schedule on, or has it tried again.

use tokio::time::Instant;
use tracing::{debug, warn};

use super::heartbeat::AfterFailure;
use super::settler::{AnswerHook, Completion, Settler};
use crate::api::{CallError, EntryFailure};
use crate::error::SettleError;
use crate::sqs::lane::Lane;

/// Why an entry's settlement failed, before the queue and message id are attached.
pub(super) enum Failure {
    Rejected(EntryFailure),
    Call { error: CallError, attempts: u32 },
    Stopped,
}

/// Answers one entry: resolves its settlement, records it, logs a failure.
pub(super) fn answer(
    settler: &Settler,
    lane: Lane,
    mut completion: Completion,
    enqueued_at: Instant,
    result: Result<(), Failure>,
) {
    let now = Instant::now();
    let latency = now.saturating_duration_since(enqueued_at).as_secs_f64();
    let ok = result.is_ok();
    let late = now > completion.visible_until;
    let metrics = &settler.metrics;
    // The message is no longer held once its settlement is answered.
    metrics.in_flight(-1.0);
    metrics.settled(&completion.outcome, ok, lane, latency);
    let result = match result {
        Ok(()) => {
            if late {
                metrics.late();
                warn!(
                    queue = %settler.name,
                    message_id = %completion.message_id,
                    outcome = completion.outcome.as_str(),
                    "settlement applied after the message's visibility deadline: it may have been delivered again"
                );
            }
            // SQS answers a delete by an outdated receipt handle with success and deletes
            // nothing: a delete answered after the message's visibility deadline, when SQS may
            // have handed the message out again, does not confirm that it is gone. A
            // visibility change by an outdated handle is refused, so its success stands.
            if late && lane == Lane::Delete {
                Err(SettleError::Unconfirmed {
                    queue: settler.name.to_string(),
                    message_id: completion.message_id.to_string(),
                    late_by: now.saturating_duration_since(completion.visible_until),
                })
            } else {
                Ok(())
            }
        }
        Err(failure) => {
            let queue_name = settler.name.to_string();
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
                queue = %settler.name,
                message_id = error.message_id(),
                outcome = completion.outcome.as_str(),
                error = %error,
                "settlement failed"
            );
            Err(error)
        }
    };
    let confirmed = result.is_ok();
    if let Some(tx) = completion.tx.take() {
        // The receiver may be gone: the entry was sent all the same.
        let _ = tx.send(result);
    }
    if let Some(AnswerHook(hook)) = completion.on_answer.take() {
        hook(confirmed, completion.visible_until);
    }
}

/// Why an extension failed, and whether sending it again could mend it: not when SQS refused
/// the entry itself (its receipt handle is no longer valid), nor once the engine stopped.
pub(super) struct ExtensionFailure {
    pub(super) error: String,
    pub(super) permanent: bool,
}

/// Records the answer for a heartbeat's extension. A failed one is tried again before the
/// message's known deadline, unless permanent (see
/// [`Schedule::failed`](super::heartbeat::Schedule::failed)).
pub(super) fn answer_extension(
    settler: &Settler,
    key: u64,
    message_id: &str,
    last: bool,
    sent_at: Instant,
    seconds: u32,
    result: Result<(), ExtensionFailure>,
) {
    match result {
        Ok(()) => {
            settler.metrics.extension(true);
            if settler.lock().extended(key, sent_at, seconds, last) {
                settler.wake.notify_one();
            }
            if last {
                warn!(
                    queue = %settler.name,
                    message_id,
                    seconds,
                    "last visibility extension: it ends at the 12 hours from the receive SQS allows, or at max_extension"
                );
            }
        }
        Err(ExtensionFailure { error, permanent }) => {
            let now = Instant::now();
            let (after, wake) = settler.lock().failed(key, now, permanent);
            if wake {
                settler.wake.notify_one();
            }
            match after {
                AfterFailure::Untracked => {
                    // Settled while its extension was in flight: the settlement decides.
                    debug!(queue = %settler.name, message_id, error = %error, "extension of a settled message failed");
                }
                AfterFailure::Retry { due, deadline } => {
                    debug!(
                        queue = %settler.name,
                        message_id,
                        error = %error,
                        retry_in = ?due.saturating_duration_since(now),
                        deadline_in = ?deadline.saturating_duration_since(now),
                        "visibility extension failed; trying again before the message's deadline"
                    );
                }
                AfterFailure::GaveUp => {
                    settler.metrics.extension(false);
                    warn!(
                        queue = %settler.name,
                        message_id,
                        error = %error,
                        permanent,
                        "visibility extension failed: the message may be delivered again before it is settled"
                    );
                }
            }
        }
    }
}
