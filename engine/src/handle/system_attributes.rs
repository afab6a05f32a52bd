//! Which system attributes the receives ask SQS for.

use crate::handle::message::{
    GROUP_ID_ATTRIBUTE, RECEIVE_COUNT_ATTRIBUTE, SENT_TIMESTAMP_ATTRIBUTE,
    SEQUENCE_NUMBER_ATTRIBUTE, TRACE_HEADER_ATTRIBUTE,
};

/// Which of each message's system attributes the receives ask SQS for;
/// [`Message::attributes`](crate::Message::attributes) holds those that came.
///
/// Every attribute SQS sends is parsed twice per message, once by the SDK and once into the
/// message, so asking only for what is read keeps receiving cheap. SQS itself sends none unless
/// asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SystemAttributes {
    /// The ones the engine reads (the default): `ApproximateReceiveCount` (the receive count
    /// and the retry cap), `SentTimestamp` (the age of the oldest message received),
    /// `AWSTraceHeader` where the sender traced the message (the message span's trace
    /// context), and on a FIFO queue `MessageGroupId` and `SequenceNumber` (each group's
    /// order).
    #[default]
    Used,
    /// Every one SQS has: also `SenderId`, `ApproximateFirstReceiveTimestamp`, and
    /// `MessageDeduplicationId` and `DeadLetterQueueSourceArn` where they apply.
    All,
}

/// SQS's name for every system attribute in a receive's `MessageSystemAttributeNames`.
const ALL_NAME: &str = "All";

impl SystemAttributes {
    /// The `MessageSystemAttributeNames` of a receive.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Self::Used => &[
                RECEIVE_COUNT_ATTRIBUTE,
                SENT_TIMESTAMP_ATTRIBUTE,
                TRACE_HEADER_ATTRIBUTE,
                GROUP_ID_ATTRIBUTE,
                SEQUENCE_NUMBER_ATTRIBUTE,
            ],
            Self::All => &[ALL_NAME],
        }
    }
}

/// Whether a receive that asked for `names` returns the system attribute `name`.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn asked_for(names: &[&str], name: &str) -> bool {
    names
        .iter()
        .any(|asked| *asked == ALL_NAME || *asked == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_asks_for_what_the_engine_reads_and_all_for_everything() {
        let used = SystemAttributes::default().names();
        for name in [
            "ApproximateReceiveCount",
            "SentTimestamp",
            "AWSTraceHeader",
            "MessageGroupId",
            "SequenceNumber",
        ] {
            assert!(asked_for(used, name), "{name}");
        }
        assert!(!asked_for(used, "SenderId"));
        assert!(!asked_for(used, "ApproximateFirstReceiveTimestamp"));
        assert!(asked_for(SystemAttributes::All.names(), "SenderId"));
    }
}
