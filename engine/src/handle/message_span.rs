//! The spans handlers run in: a message's, and a batch's. Both are INFO, so that a
//! subscriber's default level shows them, of OpenTelemetry's consumer kind, with its messaging
//! fields. With the `opentelemetry` feature they join the sender's trace: a message's span takes
//! the sender's span as parent, a batch's links to each message's sender.

use tracing::field::Empty;

use crate::handle::message::{Message, TRACE_HEADER_ATTRIBUTE};

/// An INFO span `$name` of OpenTelemetry's consumer kind, processing what came from `$queue`:
/// the messaging fields both spans carry, then `$fields`. (A macro: a span's fields are fixed
/// where it is made.)
macro_rules! consumer_span {
    ($name:literal, $queue:expr, $($fields:tt)*) => {
        tracing::info_span!(
            $name,
            otel.name = Empty,
            otel.kind = "consumer",
            messaging.system = "aws_sqs",
            messaging.operation.type = "process",
            messaging.destination.name = $queue,
            $($fields)*
        )
    };
}

/// The span a message's handler runs in, with the message's trace context as fields (the
/// `AWSTraceHeader` system attribute and a `traceparent` message attribute) and, with the
/// `opentelemetry` feature, as its parent.
pub(crate) fn message_span(queue: &str, message: &Message) -> tracing::Span {
    let span = consumer_span!(
        "message",
        queue,
        messaging.message.id = message.id(),
        messaging.sqs.receive_count = message.receive_count(),
        messaging.message.group_id = message.group_id(),
        aws.trace_header = message.attribute(TRACE_HEADER_ATTRIBUTE),
        traceparent = message
            .message_attribute("traceparent")
            .and_then(crate::attribute::MessageAttribute::as_str),
    );
    #[cfg(feature = "opentelemetry")]
    if !span.is_disabled() {
        span.record("otel.name", format!("process {queue}"));
        crate::handle::trace_context::join(&span, message);
    }
    span
}

/// The span a batch handler runs in: the messaging fields of the batch, and with the
/// `opentelemetry` feature a link to each message's sender.
pub(crate) fn batch_span<'a>(
    queue: &str,
    messages: impl ExactSizeIterator<Item = &'a Message>,
) -> tracing::Span {
    let span = consumer_span!(
        "batch",
        queue,
        messaging.batch.message_count = messages.len(),
    );
    #[cfg(feature = "opentelemetry")]
    if !span.is_disabled() {
        span.record("otel.name", format!("process {queue}"));
        crate::handle::trace_context::link_each(&span, messages);
    }
    #[cfg(not(feature = "opentelemetry"))]
    drop(messages);
    span
}
