//! Where a batch of publishes goes: a queue, or with feature `sns` a topic.

use crate::queue_url::is_fifo;

/// Where a batch of publishes goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    /// An SQS queue, by name or URL (`SendMessageBatch`).
    Queue(String),
    /// An SNS topic, by name or ARN (`PublishBatch`).
    #[cfg(feature = "sns")]
    Topic(String),
}

impl Target {
    /// The queue or topic, as the target holds it.
    pub(crate) fn name(&self) -> &str {
        match self {
            Target::Queue(name) => name,
            #[cfg(feature = "sns")]
            Target::Topic(name) => name,
        }
    }

    /// Whether its publishes keep their order: one call at a time.
    pub(crate) fn is_fifo(&self) -> bool {
        is_fifo(self.name())
    }

    /// The batch call this target's publishes go out in.
    pub(crate) fn action(&self) -> &'static str {
        match self {
            Target::Queue(_) => "SendMessageBatch",
            #[cfg(feature = "sns")]
            Target::Topic(_) => "PublishBatch",
        }
    }
}
