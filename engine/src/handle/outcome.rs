//! What a handler decides for a message.

use std::time::Duration;

/// How a message is settled. Each outcome is one entry of a batch call on that message.
///
/// | outcome | SQS call | effect |
/// |---|---|---|
/// | [`Ack`](Outcome::Ack) | `DeleteMessage` | gone |
/// | [`Drop`](Outcome::Drop) | `DeleteMessage`; at the redrive cap, visibility 0 | gone, or on to the dead-letter queue |
/// | [`Retry`](Outcome::Retry) | `ChangeMessageVisibility(0)` | visible again at once |
/// | [`RetryAfter`](Outcome::RetryAfter) | `ChangeMessageVisibility(d)` | back after `d`, within 12 h of the receive |
///
/// A retry never leaves the queue: the same message comes back, with the same id and its
/// receive count one higher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// Processed: delete the message.
    Ack,
    /// Give up on the message: delete it. SQS has no call that rejects a message and keeps it.
    /// On a queue whose redrive policy the engine declared, the delivery at the last allowed
    /// receive is returned instead, so that SQS moves it to the dead-letter queue.
    Drop,
    /// Hand the message out again at once (visibility 0).
    Retry,
    /// Hand the message out again after the delay, counted in whole seconds rounded up so the
    /// message never comes back early. A delay reaching past 12 hours from the receive is
    /// shortened to end there, with a warning naming the queue.
    RetryAfter(Duration),
}

impl Outcome {
    /// A short, stable name: `ack`, `drop`, `retry` or `retry_after`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Ack => "ack",
            Self::Drop => "drop",
            Self::Retry => "retry",
            Self::RetryAfter(_) => "retry_after",
        }
    }

    pub(crate) fn index(&self) -> usize {
        match self {
            Self::Ack => 0,
            Self::Drop => 1,
            Self::Retry => 2,
            Self::RetryAfter(_) => 3,
        }
    }

    pub(crate) const NAMES: [&'static str; 4] = ["ack", "drop", "retry", "retry_after"];
}

/// What a batch handler decides for its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatchOutcome {
    /// One outcome for every message of the batch.
    All(Outcome),
    /// One outcome per message, in the order of the slice the handler got. A vector of another
    /// length is a handler bug: the messages without an outcome are left unsettled (they come
    /// back when their visibility lapses) and an error is logged.
    Each(Vec<Outcome>),
}

impl From<Outcome> for BatchOutcome {
    fn from(outcome: Outcome) -> Self {
        Self::All(outcome)
    }
}

impl From<Vec<Outcome>> for BatchOutcome {
    fn from(outcomes: Vec<Outcome>) -> Self {
        Self::Each(outcomes)
    }
}
