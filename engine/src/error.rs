//! Errors: opening a queue, configuring the engine, settling a message.

use std::time::Duration;

use crate::api::CallError;

/// An engine could not start or had to stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting is out of its range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The queue does not exist (or the credentials may not see it).
    #[error("queue `{queue}` does not exist")]
    QueueNotFound {
        /// The queue as it was named.
        queue: String,
    },
    /// A call the engine needs to open the queue failed.
    #[error("opening queue `{queue}`: {action} failed")]
    Open {
        /// The queue as it was named.
        queue: String,
        /// The SQS action that failed.
        action: &'static str,
        /// What SQS or the connection said.
        #[source]
        source: CallError,
    },
    /// A redrive policy was declared by halves: `max_attempts(..)` without `dead_letter(..)`, or
    /// the reverse.
    #[error(
        "queue `{queue}` declares {declared} without {missing}: its redrive policy needs max_attempts(..) and dead_letter(..) together"
    )]
    IncompleteRedrive {
        /// The queue as it was named.
        queue: String,
        /// The half that was declared: `max_attempts(..)` or `dead_letter(..)`.
        declared: &'static str,
        /// The half that is missing: `dead_letter(..)` or `max_attempts(..)`.
        missing: &'static str,
    },
    /// The dead-letter queue does not exist, and the engine was not asked to create it.
    #[error("dead-letter queue `{dead_letter}` of queue `{queue}` does not exist")]
    DeadLetterQueueNotFound {
        /// The queue as it was named.
        queue: String,
        /// The dead-letter queue as it was named.
        dead_letter: String,
    },
    /// A call the engine cannot work without (a receive, a delete, a visibility change)
    /// failed in a way retrying cannot mend (the queue is gone, the credentials or the queue's
    /// KMS key are refused), and nothing else came of it, for longer than
    /// [`give_up_after`](crate::EngineBuilder::give_up_after): the engine stopped receiving,
    /// let its handlers finish, sent their settlements, and returned.
    #[error(
        "queue `{queue}`: {action} failed for {failing_for:?} in a way retrying cannot mend; gave up"
    )]
    GaveUp {
        /// The queue as it was named.
        queue: String,
        /// The SQS action that failed: `ReceiveMessage`, `DeleteMessageBatch` or
        /// `ChangeMessageVisibilityBatch`.
        action: &'static str,
        /// How long the failure had lasted.
        failing_for: Duration,
        /// The last error of that call.
        #[source]
        source: CallError,
    },
    /// The queue's attributes say something the engine cannot work with.
    #[error("queue `{queue}` is misconfigured: {reason}")]
    Misconfigured {
        /// The queue as it was named.
        queue: String,
        /// What is wrong.
        reason: String,
    },
}

/// A setting of the engine is out of its range. It names the setting and the range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{setting}` is {value}, but must be {expected}")]
pub struct ConfigError {
    /// The builder method that set it.
    pub setting: &'static str,
    /// The value given, as text.
    pub value: String,
    /// The allowed range.
    pub expected: &'static str,
}

impl ConfigError {
    pub(crate) fn new(setting: &'static str, value: impl ToString, expected: &'static str) -> Self {
        Self {
            setting,
            value: value.to_string(),
            expected,
        }
    }

    pub(crate) fn duration(setting: &'static str, value: Duration, expected: &'static str) -> Self {
        Self::new(setting, format!("{value:?}"), expected)
    }
}

/// A message's settlement did not take effect.
///
/// SQS may still hand the message out again: when its visibility lapses, or at once if it was
/// a retry. Whatever the variant, the other messages of the same batch call are not affected.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SettleError {
    /// SQS refused this entry of the batch call, for example because the receipt handle is
    /// invalid or expired.
    #[error("SQS refused the settlement of message {message_id} on queue `{queue}`: {code}")]
    Rejected {
        /// The queue.
        queue: String,
        /// The message.
        message_id: String,
        /// SQS's error code.
        code: String,
        /// SQS's description, when it gave one.
        detail: Option<String>,
    },
    /// The batch call failed as a whole, and kept failing for as long as the retry budget
    /// allowed, or failed in a way that retrying cannot mend.
    #[error("settling message {message_id} on queue `{queue}` failed after {attempts} attempt(s)")]
    Failed {
        /// The queue.
        queue: String,
        /// The message.
        message_id: String,
        /// Calls made for this entry.
        attempts: u32,
        /// The last call's error.
        #[source]
        source: CallError,
    },
    /// The engine had stopped before the settlement could be sent.
    #[error("the engine for queue `{queue}` stopped before message {message_id} was settled")]
    Stopped {
        /// The queue.
        queue: String,
        /// The message.
        message_id: String,
    },
    /// SQS answered the delete with success, but after the message's visibility deadline as
    /// the engine knew it. By then SQS may have handed the message out again, and it answers a
    /// delete by an outdated receipt handle with success and deletes nothing: the message may
    /// come back. Counted in `sqs_engine_late_settlements_total` (with late visibility
    /// changes, which do not fail: SQS refuses one by an outdated receipt handle).
    #[error(
        "the delete of message {message_id} on queue `{queue}` was answered {late_by:?} after its visibility deadline: it may not have taken effect"
    )]
    Unconfirmed {
        /// The queue.
        queue: String,
        /// The message.
        message_id: String,
        /// How long after the message's visibility deadline SQS answered.
        late_by: Duration,
    },
}

impl SettleError {
    /// The message whose settlement failed.
    pub fn message_id(&self) -> &str {
        match self {
            Self::Rejected { message_id, .. }
            | Self::Failed { message_id, .. }
            | Self::Stopped { message_id, .. }
            | Self::Unconfirmed { message_id, .. } => message_id,
        }
    }
}
