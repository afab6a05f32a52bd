//! What a test reads back of the messages sent to a queue or published to a topic.

use crate::attribute::MessageAttribute;

/// One message as it was sent to a queue, for a test to read back.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SentMessage {
    /// The message id SQS assigned.
    pub message_id: String,
    /// The body.
    pub body: String,
    /// The message attributes.
    pub attributes: Vec<(String, MessageAttribute)>,
    /// The FIFO group, when there is one.
    pub group_id: Option<String>,
}
