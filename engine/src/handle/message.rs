//! A received message, as a handler sees it.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::api::ReceivedMessage;
use crate::attribute::MessageAttribute;

/// The system attribute that counts the receives of a message.
pub const RECEIVE_COUNT_ATTRIBUTE: &str = "ApproximateReceiveCount";
/// The system attribute holding the send time, in milliseconds since the epoch.
pub const SENT_TIMESTAMP_ATTRIBUTE: &str = "SentTimestamp";
/// The system attribute naming a FIFO message's group.
pub const GROUP_ID_ATTRIBUTE: &str = "MessageGroupId";
/// The system attribute holding a FIFO message's order within its group.
pub(crate) const SEQUENCE_NUMBER_ATTRIBUTE: &str = "SequenceNumber";
/// The system attribute carrying a message's X-Ray trace header, when the sender traced it.
pub(crate) const TRACE_HEADER_ATTRIBUTE: &str = "AWSTraceHeader";

/// One delivery of an SQS message: its body, ids and attributes.
///
/// The receipt handle is not part of it: the engine keeps it, and settles the message with the
/// outcome the handler returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    id: String,
    body: String,
    receive_count: u32,
    attributes: HashMap<String, String>,
    message_attributes: HashMap<String, MessageAttribute>,
}

impl Message {
    pub(crate) fn from_received(received: ReceivedMessage) -> (Self, String) {
        let receive_count = received
            .attributes
            .get(RECEIVE_COUNT_ATTRIBUTE)
            .and_then(|count| count.parse().ok())
            .unwrap_or(1);
        (
            Self {
                id: received.message_id,
                body: received.body,
                receive_count,
                attributes: received.attributes,
                message_attributes: received.message_attributes,
            },
            received.receipt_handle,
        )
    }

    /// Puts `body`, fetched from where the received body pointed, in its place, and lets
    /// `unmark` take the marking attributes out of the message attributes.
    #[cfg(feature = "s3")]
    pub(crate) fn replace_stored_body(
        &mut self,
        body: String,
        unmark: impl FnOnce(&mut HashMap<String, MessageAttribute>),
    ) {
        self.body = body;
        unmark(&mut self.message_attributes);
    }

    /// The SNS notification this message carries, when a topic delivered it without raw
    /// message delivery: the published message, its subject, topic and id, and its message
    /// attributes, which travel inside the body rather than as the SQS message's own.
    ///
    /// # Errors
    ///
    /// [`SnsEnvelopeError`](crate::SnsEnvelopeError) when the body is not such a
    /// notification: sent to the queue directly or with raw message delivery (not JSON), an
    /// SNS message of another type, a field missing, or an attribute that cannot be read.
    /// Returned from a handler with `?`, it settles the message by `on_handler_error`.
    pub fn sns_notification(&self) -> Result<crate::SnsNotification, crate::SnsEnvelopeError> {
        crate::handle::sns_envelope::unwrap(&self.body)
    }

    /// The message id SQS assigned when it was sent. A message received again keeps it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The body.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// Takes the body out of the message.
    pub fn into_body(self) -> String {
        self.body
    }

    /// How many times SQS has handed this message out, this receive included: the first
    /// delivery counts as one. It is `ApproximateReceiveCount`, so it counts receives whose
    /// visibility timeout lapsed, not only the retries a handler asked for.
    pub fn receive_count(&self) -> u32 {
        self.receive_count
    }

    /// When the message was sent, from its `SentTimestamp` attribute.
    pub fn sent_at(&self) -> Option<SystemTime> {
        let millis: u64 = self
            .attributes
            .get(SENT_TIMESTAMP_ATTRIBUTE)?
            .parse()
            .ok()?;
        UNIX_EPOCH.checked_add(Duration::from_millis(millis))
    }

    /// The message group of a FIFO queue's message, from its `MessageGroupId` attribute; `None`
    /// on a standard queue.
    pub fn group_id(&self) -> Option<&str> {
        self.attribute(GROUP_ID_ATTRIBUTE)
    }

    /// The order SQS gave a FIFO queue's message within its group, from its `SequenceNumber`
    /// attribute; `None` on a standard queue.
    pub fn sequence_number(&self) -> Option<u128> {
        self.attribute(SEQUENCE_NUMBER_ATTRIBUTE)?.parse().ok()
    }

    /// A system attribute by name (`ApproximateReceiveCount`, `SentTimestamp`,
    /// `MessageGroupId`, ...), if the receive asked for it and SQS has it.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.get(name).map(String::as_str)
    }

    /// The system attributes the message came with, by name: those
    /// [`EngineBuilder::system_attributes`](crate::EngineBuilder::system_attributes) asks for.
    pub fn attributes(&self) -> &HashMap<String, String> {
        &self.attributes
    }

    /// A message attribute the sender set, by name.
    pub fn message_attribute(&self, name: &str) -> Option<&MessageAttribute> {
        self.message_attributes.get(name)
    }

    /// All message attributes the sender set, by name.
    pub fn message_attributes(&self) -> &HashMap<String, MessageAttribute> {
        &self.message_attributes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(attributes: &[(&str, &str)]) -> ReceivedMessage {
        ReceivedMessage {
            message_id: "m-1".into(),
            receipt_handle: "rh-1".into(),
            body: "hello".into(),
            attributes: attributes
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            message_attributes: HashMap::new(),
        }
    }

    #[test]
    fn the_receive_count_is_approximate_receive_count() {
        let (message, receipt) =
            Message::from_received(received(&[(RECEIVE_COUNT_ATTRIBUTE, "3")]));
        assert_eq!(message.receive_count(), 3);
        assert_eq!(receipt, "rh-1");
        assert_eq!(message.id(), "m-1");
        assert_eq!(message.body(), "hello");
    }

    #[test]
    fn a_missing_receive_count_reads_as_the_first_delivery() {
        let (message, _) = Message::from_received(received(&[]));
        assert_eq!(message.receive_count(), 1);
    }

    #[test]
    fn sent_at_comes_from_sent_timestamp() {
        let (message, _) =
            Message::from_received(received(&[(SENT_TIMESTAMP_ATTRIBUTE, "1700000000123")]));
        assert_eq!(
            message.sent_at(),
            Some(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123))
        );
    }
}
