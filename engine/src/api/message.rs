//! What the calls of [`SqsApi`](super::SqsApi) take and return: a message to send, a receive's
//! arguments, a received message, a queue's attributes.

use std::collections::HashMap;
use std::time::Duration;

use crate::attribute::{AttributeValue, MessageAttribute};

/// One message of a `SendMessageBatch` call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendEntry {
    /// The body: text SQS accepts (no C0 controls but tab, LF and CR; no U+FFFE or U+FFFF).
    pub body: String,
    /// The message attributes, by name: at most ten, none with an empty value.
    pub attributes: Vec<(String, MessageAttribute)>,
    /// The message group of a FIFO queue; `None` on a standard queue.
    pub group_id: Option<String>,
    /// The deduplication id on a FIFO queue; `None` on a standard queue, or on a FIFO queue
    /// with content-based deduplication.
    pub deduplication_id: Option<String>,
}

impl SendEntry {
    /// What SQS counts against its message size limit (1 MiB): the body, and each message
    /// attribute's name, data type and value.
    pub fn size(&self) -> usize {
        Self::size_of(&self.body, &self.attributes)
    }

    /// [`size`](Self::size) of a body and attributes not yet made an entry.
    pub(crate) fn size_of(body: &str, attributes: &[(String, MessageAttribute)]) -> usize {
        body.len()
            + attributes
                .iter()
                .map(|(name, attribute)| attribute_size(name, attribute))
                .sum::<usize>()
    }
}

/// What SQS counts of one message attribute against the message size: its name, data type and
/// value (text or binary).
fn attribute_size(name: &str, attribute: &MessageAttribute) -> usize {
    name.len()
        + attribute.data_type.len()
        + match &attribute.value {
            AttributeValue::String(text) => text.len(),
            AttributeValue::Binary(bytes) => bytes.len(),
        }
}

/// The arguments of one `ReceiveMessage` call.
#[derive(Debug, Clone)]
pub struct ReceiveRequest<'a> {
    /// The queue's URL.
    pub queue_url: &'a str,
    /// At most this many messages, 1..=10.
    pub max_messages: u8,
    /// The long-poll wait, 0..=20 s.
    pub wait_time: Duration,
    /// The visibility timeout the received messages get, in seconds.
    pub visibility_timeout: u32,
    /// On a FIFO queue, the `ReceiveRequestAttemptId`: a receive retried with the same id
    /// within five minutes gets the messages the first attempt took (if none was changed
    /// since), so an answer lost on the way does not hide them until their visibility lapses.
    /// `None` on a standard queue.
    pub attempt_id: Option<&'a str>,
    /// The system attributes each message is to carry, by SQS's names (`All` for every one):
    /// the receive's `MessageSystemAttributeNames`.
    pub system_attributes: &'a [&'a str],
}

/// One message as a `ReceiveMessage` call returned it.
#[derive(Debug, Clone, Default)]
pub struct ReceivedMessage {
    /// The message id SQS assigned at send.
    pub message_id: String,
    /// The receipt handle of this receive.
    pub receipt_handle: String,
    /// The body.
    pub body: String,
    /// The system attributes (`ApproximateReceiveCount`, `SentTimestamp`, ...), by name.
    pub attributes: HashMap<String, String>,
    /// The message attributes the sender set.
    pub message_attributes: HashMap<String, MessageAttribute>,
}

impl ReceivedMessage {
    /// What SQS counts toward the message's size (as [`SendEntry::size`] does at send): the
    /// body, and each message attribute's name, data type and value. System attributes are not
    /// counted.
    pub(crate) fn size(&self) -> usize {
        self.body.len()
            + self
                .message_attributes
                .iter()
                .map(|(name, attribute)| attribute_size(name, attribute))
                .sum::<usize>()
    }
}

/// The queue attributes the engine reads when it opens a queue.
#[derive(Debug, Clone, Default)]
pub struct QueueAttributes {
    /// The queue's ARN.
    pub arn: Option<String>,
    /// The queue's default visibility timeout, in seconds.
    pub visibility_timeout: Option<u32>,
    /// Whether it is a FIFO queue.
    pub fifo: bool,
    /// The queue's redrive policy, as the JSON SQS stores.
    pub redrive_policy: Option<String>,
    /// The queue's access policy, as the JSON SQS stores.
    pub policy: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_received_message_counts_its_attributes_as_a_sent_one_does() {
        let attributes = vec![
            (
                "kind".to_owned(),
                MessageAttribute {
                    data_type: "String".to_owned(),
                    value: AttributeValue::String("order".to_owned()),
                },
            ),
            (
                "blob".to_owned(),
                MessageAttribute {
                    data_type: "Binary.gz".to_owned(),
                    value: AttributeValue::Binary(vec![0; 100]),
                },
            ),
        ];
        let received = ReceivedMessage {
            body: "hello".to_owned(),
            attributes: HashMap::from([("SentTimestamp".to_owned(), "1".to_owned())]),
            message_attributes: attributes.iter().cloned().collect(),
            ..ReceivedMessage::default()
        };
        // 5 + (4 + 6 + 5) + (4 + 9 + 100); the system attribute is not counted.
        assert_eq!(received.size(), 133);
        assert_eq!(received.size(), SendEntry::size_of("hello", &attributes));
    }
}
