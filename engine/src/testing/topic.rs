//! One topic of the double's SNS (feature `sns`), as the state holds it.

use super::sent::SentMessage;

/// One topic: its ARN, kind, subscribed queues and every message published to it.
pub(super) struct Topic {
    pub(super) arn: String,
    pub(super) fifo: bool,
    /// The subscribed queues, by name, in subscription order.
    pub(super) queues: Vec<String>,
    pub(super) published: Vec<SentMessage>,
}
