//! Why a publish did not happen: [`PublishError`].

use crate::api::CallError;

/// A message was not published. Each names the destination as the publish named it.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The message cannot be sent as it is: SQS would refuse or alter it. Nothing was sent.
    #[error("publishing to `{destination}` refused: {reason}")]
    Refused {
        /// The destination.
        destination: String,
        /// What SQS would not take.
        reason: String,
    },
    /// A group or deduplication id was given for a standard queue, which has neither.
    #[error("`{destination}` is a standard queue: it takes no {setting}")]
    NotFifo {
        /// The destination.
        destination: String,
        /// `group_id` or `deduplication_id`.
        setting: &'static str,
    },
    /// SQS refused the message's entry, or could not be reached within the retry budget.
    #[error("publishing to `{destination}` failed")]
    Failed {
        /// The destination.
        destination: String,
        /// What SQS or the connection said.
        #[source]
        source: CallError,
    },
    /// The body was to go to S3 and could not be stored (feature `s3`). Nothing was sent.
    #[error("publishing to `{destination}` failed: {reason}")]
    NotStored {
        /// The destination.
        destination: String,
        /// Why the body could not be stored.
        reason: String,
    },
    /// The publisher was closed: nothing more is sent through it.
    #[error("the publisher is closed")]
    Closed,
}
