//! A message that carries a trace context, as the tests of the message span send it.

use sqs_engine::{AttributeValue, MessageAttribute, SendEntry};

/// The `traceparent` of the W3C Trace Context specification's example: version 00, a trace
/// id, a parent span id, sampled.
pub const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A message of `body` on a standard queue whose `traceparent` attribute is [`TRACEPARENT`].
pub fn traced_entry(body: &str) -> SendEntry {
    SendEntry {
        body: body.into(),
        attributes: vec![(
            "traceparent".into(),
            MessageAttribute {
                data_type: "String".into(),
                value: AttributeValue::String(TRACEPARENT.into()),
            },
        )],
        group_id: None,
        deduplication_id: None,
    }
}
