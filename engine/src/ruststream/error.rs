//! The broker's error type.

use std::error::Error as StdError;

/// What went wrong in the RustStream broker.
///
/// Startup errors name the queue; publish errors name the destination. The engine's own
/// [`Error`](crate::Error) and [`SettleError`](crate::SettleError) are carried as sources.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqsError {
    /// The broker's configuration could not be turned into a client.
    #[error("sqs broker configuration: {0}")]
    Config(String),
    /// The broker was shut down, or never connected: nothing more is sent through it.
    #[error("the sqs broker is not connected")]
    NotConnected,
    /// A redrive policy was declared by halves: `max_attempts(..)` without `dead_letter(..)`,
    /// or the reverse.
    #[error(
        "the registration on `{queue}` declares {declared} without {missing}: the queue's redrive policy needs max_attempts(..) and dead_letter(..) together"
    )]
    IncompleteRedrive {
        /// The queue, as the registration named it.
        queue: String,
        /// The half that was declared: `max_attempts(..)` or `dead_letter(..)`.
        declared: &'static str,
        /// The half that is missing: `dead_letter(..)` or `max_attempts(..)`.
        missing: &'static str,
    },
    /// A setting of an [`SqsQueue`](super::SqsQueue) is out of its range: the queue and what
    /// is wrong with it.
    #[error("{0}")]
    InvalidQueue(String),
    /// A subscription's queue, or its dead-letter queue, is missing or could not be resolved,
    /// created or opened.
    #[error("queue `{name}` cannot be opened")]
    Queue {
        /// The queue, as the registration named it.
        name: String,
        /// The engine's error, with its cause.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// Opening a subscription failed otherwise: the engine refused its settings, or the queue
    /// is not what they need.
    #[error("subscribing to queue `{queue}` failed")]
    Subscribe {
        /// The queue, as the registration named it.
        queue: String,
        /// The engine's error (boxed: it is the largest variant's payload).
        #[source]
        source: Box<crate::Error>,
    },
    /// A message cannot be sent as it is: SQS would refuse or alter it. Nothing was sent.
    #[error("publishing to `{destination}` refused: {reason}")]
    Refused {
        /// The destination, as the publish named it.
        destination: String,
        /// What SQS would not take.
        reason: String,
    },
    /// A group or deduplication id was asked for on a standard queue, which has neither.
    #[error("`{destination}` is a standard queue: it takes no {setting}")]
    NotFifo {
        /// The destination, as the publish named it.
        destination: String,
        /// The setting a standard queue cannot honour: `group_id` or `deduplication_id`.
        setting: &'static str,
    },
    /// A call on a topic failed: `CreateTopic`, or the `Subscribe` of a queue to it (feature
    /// `sns`).
    #[error("topic `{name}`: the call failed")]
    Admin {
        /// The topic, as the call named it.
        name: String,
        /// What SNS or the connection said.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The access policy that lets a topic deliver to a queue could not be read, merged or
    /// written (feature `sns`).
    #[error("granting topic `{topic}` delivery to queue `{queue}` failed")]
    QueuePolicy {
        /// The topic the grant is for.
        topic: String,
        /// The queue whose policy carries it.
        queue: String,
        /// What SQS said, or why the policy could not be merged.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// SQS did not take the message, or could not be reached within the retry budget.
    #[error("publishing to `{destination}` failed")]
    Publish {
        /// The destination, as the publish named it.
        destination: String,
        /// What SQS or the connection said.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
}

impl From<crate::PublishError> for SqsError {
    fn from(error: crate::PublishError) -> Self {
        use crate::PublishError;
        match error {
            PublishError::Refused {
                destination,
                reason,
            } => Self::Refused {
                destination,
                reason,
            },
            PublishError::NotFifo {
                destination,
                setting,
            } => Self::NotFifo {
                destination,
                setting,
            },
            PublishError::Failed {
                destination,
                source,
            } => Self::Publish {
                destination,
                source: Box::new(source),
            },
            PublishError::NotStored {
                destination,
                reason,
            } => Self::Publish {
                destination,
                source: reason.into(),
            },
            PublishError::Closed => Self::NotConnected,
        }
    }
}
