//! Where a batch of publishes goes: a queue, or with feature `sns` a topic.

use crate::limits::MAX_MESSAGE_BYTES;
use crate::queue_url::is_fifo;

/// The most bytes of messages in one batch call that every SQS implementation takes: SQS's
/// limit before it became 1 MiB, which some implementations still hold to.
pub(crate) const SMALL_BATCH_BYTES: usize = 256 * 1024;

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

    /// The most bytes of messages one batch call takes: 1 MiB for `SendMessageBatch` (SQS's
    /// limit; an implementation that refuses it gets [`SMALL_BATCH_BYTES`] from then on),
    /// SNS's 256 KiB for `PublishBatch`. A larger message goes alone.
    pub(crate) fn max_batch_bytes(&self) -> usize {
        match self {
            Target::Queue(_) => MAX_MESSAGE_BYTES,
            #[cfg(feature = "sns")]
            Target::Topic(_) => crate::sqs::sns_api::MAX_TOPIC_MESSAGE_BYTES,
        }
    }
}
