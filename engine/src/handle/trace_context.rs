//! The trace context a message carries, read into OpenTelemetry's terms and written back out:
//! the W3C `traceparent` and `tracestate` message attributes, and the X-Ray `AWSTraceHeader`
//! system attribute that SQS sets for a traced sender.
//!
//! Reading joins a message's span to its sender's trace: the message span's parent is the
//! sender's span, and a batch span links to each message's. Writing puts the current span's
//! context on a message being published. Both are pure apart from the span they are given:
//! the codecs are the W3C Trace Context level 1 and X-Ray header formats, whatever text-map
//! propagator the application installed.

use std::str::FromStr;

use opentelemetry::Context;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::attribute::MessageAttribute;
use crate::handle::message::{Message, TRACE_HEADER_ATTRIBUTE};

/// The message attribute of the W3C trace parent.
pub(crate) const TRACEPARENT_ATTRIBUTE: &str = "traceparent";

/// The message attribute of the W3C vendor trace state.
pub(crate) const TRACESTATE_ATTRIBUTE: &str = "tracestate";

/// The sender's span context a message carries: its `traceparent` (with its `tracestate`),
/// else its `AWSTraceHeader`; `None` when it carries neither, or neither is well formed.
pub(crate) fn remote_context(message: &Message) -> Option<SpanContext> {
    let text = |name| {
        message
            .message_attribute(name)
            .and_then(MessageAttribute::as_str)
    };
    text(TRACEPARENT_ATTRIBUTE)
        .and_then(|parent| from_traceparent(parent, text(TRACESTATE_ATTRIBUTE)))
        .or_else(|| {
            message
                .attribute(TRACE_HEADER_ATTRIBUTE)
                .and_then(from_xray)
        })
}

/// Makes the sender's span, where the message carries one, the parent of `span` (a message's
/// span, not yet entered). Without an OpenTelemetry layer in the subscriber, nothing happens.
pub(crate) fn join(span: &tracing::Span, message: &Message) {
    if let Some(remote) = remote_context(message) {
        // Refused only where the span is disabled or already started: then it has no
        // OpenTelemetry span to parent.
        let _ = span.set_parent(Context::new().with_remote_span_context(remote));
    }
}

/// Links `span` (a batch's span, not yet entered) to the sender's span of each message that
/// carries one.
pub(crate) fn link_each<'a>(span: &tracing::Span, messages: impl IntoIterator<Item = &'a Message>) {
    for remote in messages.into_iter().filter_map(remote_context) {
        span.add_link(remote);
    }
}

/// Adds the current span's context to a message's `attributes` (see [`attributes_of`]),
/// unless they hold a `traceparent` already: each attribute only while SQS's ten leave room
/// and `fits` holds of the attributes with it (the message's size).
pub(crate) fn carry_current(
    attributes: &mut Vec<(String, MessageAttribute)>,
    fits: impl Fn(&[(String, MessageAttribute)]) -> bool,
) {
    use crate::limits::MAX_MESSAGE_ATTRIBUTES;
    if attributes
        .iter()
        .any(|(name, _)| name == TRACEPARENT_ATTRIBUTE)
    {
        return;
    }
    for attribute in attributes_of(&tracing::Span::current()) {
        if attributes.len() >= MAX_MESSAGE_ATTRIBUTES {
            break;
        }
        attributes.push(attribute);
        if !fits(attributes) {
            attributes.pop();
            break;
        }
    }
}

/// The message attributes that carry `span`'s context to a consumer: `traceparent`, and
/// `tracestate` where the trace has one. None when the span is disabled, or the subscriber
/// has no OpenTelemetry layer.
fn attributes_of(span: &tracing::Span) -> Vec<(String, MessageAttribute)> {
    let context = span.context();
    let span = context.span();
    let current = span.span_context();
    if !current.is_valid() {
        return Vec::new();
    }
    let text = |value: String| MessageAttribute {
        data_type: "String".into(),
        value: crate::attribute::AttributeValue::String(value),
    };
    let mut attributes = vec![(
        TRACEPARENT_ATTRIBUTE.to_owned(),
        text(traceparent_of(current)),
    )];
    let state = current.trace_state().header();
    if !state.is_empty() {
        attributes.push((TRACESTATE_ATTRIBUTE.to_owned(), text(state)));
    }
    attributes
}

/// The `traceparent` of a span context: version 00.
fn traceparent_of(context: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        context.trace_id(),
        context.span_id(),
        context.trace_flags().to_u8()
    )
}

/// A W3C `traceparent` (and its `tracestate`) as a remote span context: `None` for a malformed
/// header, version `ff`, or an all-zero trace or span id. A later version is read by its first
/// four fields, as the specification asks.
fn from_traceparent(parent: &str, state: Option<&str>) -> Option<SpanContext> {
    let parent = parent.trim();
    let mut fields = parent.split('-');
    let version = fields.next()?;
    let trace = fields.next()?;
    let span = fields.next()?;
    let flags = fields.next()?;
    if version.len() != 2 || !is_lower_hex(version) || version == "ff" {
        return None;
    }
    if version == "00" && fields.next().is_some() {
        return None;
    }
    if trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    if !(is_lower_hex(trace) && is_lower_hex(span) && is_lower_hex(flags)) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    // Only the sampled bit is defined; the others are not carried on.
    let flags = TraceFlags::new(flags) & TraceFlags::SAMPLED;
    let state = state
        .and_then(|state| TraceState::from_str(state).ok())
        .unwrap_or_default();
    let context = SpanContext::new(trace_id, span_id, flags, true, state);
    context.is_valid().then_some(context)
}

/// An X-Ray trace header (`Root=1-{8 hex}-{24 hex};Parent={16 hex};Sampled=1`, fields in any
/// order) as a remote span context: the root's two hex parts make the 128-bit trace id. `None`
/// without a well-formed root and parent; sampled only with `Sampled=1`.
fn from_xray(header: &str) -> Option<SpanContext> {
    let mut root = None;
    let mut parent = None;
    let mut sampled = false;
    for field in header.split(';') {
        let Some((key, value)) = field.trim().split_once('=') else {
            continue;
        };
        match key {
            "Root" => root = Some(value),
            "Parent" => parent = Some(value),
            "Sampled" => sampled = value == "1",
            _ => {}
        }
    }
    let mut parts = root?.split('-');
    let (Some("1"), Some(epoch), Some(unique), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let parent = parent?;
    if epoch.len() != 8 || unique.len() != 24 || parent.len() != 16 {
        return None;
    }
    if !(is_hex(epoch) && is_hex(unique) && is_hex(parent)) {
        return None;
    }
    let trace_id = TraceId::from_hex(&format!("{epoch}{unique}")).ok()?;
    let span_id = SpanId::from_hex(parent).ok()?;
    let flags = if sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    let context = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
    context.is_valid().then_some(context)
}

/// Whether `text` is all lower-case hex digits, as W3C Trace Context requires.
fn is_lower_hex(text: &str) -> bool {
    text.bytes()
        .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// Whether `text` is all hex digits.
fn is_hex(text: &str) -> bool {
    text.bytes().all(|byte| byte.is_ascii_hexdigit())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt;

    use crate::attribute::AttributeValue;
    use crate::limits::MAX_MESSAGE_ATTRIBUTES;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /// Runs `f` in a recorded span of a subscriber with an OpenTelemetry layer.
    pub(crate) fn in_traced_span<T>(f: impl FnOnce() -> T) -> T {
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || tracing::info_span!("send").in_scope(f))
    }

    fn text(value: &str) -> MessageAttribute {
        MessageAttribute {
            data_type: "String".into(),
            value: AttributeValue::String(value.into()),
        }
    }

    fn names(attributes: &[(String, MessageAttribute)]) -> Vec<&str> {
        attributes.iter().map(|(name, _)| name.as_str()).collect()
    }

    #[test]
    fn the_current_context_goes_on_a_message_only_where_it_fits_and_none_is_set() {
        let (carried, full, own, big) = in_traced_span(|| {
            let mut carried = vec![("tenant".to_owned(), text("acme"))];
            carry_current(&mut carried, |_| true);
            let mut full: Vec<_> = (0..MAX_MESSAGE_ATTRIBUTES)
                .map(|n| (format!("h{n}"), text("v")))
                .collect();
            carry_current(&mut full, |_| true);
            let mut own = vec![(TRACEPARENT_ATTRIBUTE.to_owned(), text(PARENT))];
            carry_current(&mut own, |_| true);
            let mut big = Vec::new();
            carry_current(&mut big, |_| false);
            (carried, full, own, big)
        });
        assert_eq!(names(&carried), ["tenant", TRACEPARENT_ATTRIBUTE]);
        let parent = carried[1].1.as_str().expect("text");
        assert!(from_traceparent(parent, None).is_some(), "{parent}");
        assert_eq!(
            full.len(),
            MAX_MESSAGE_ATTRIBUTES,
            "no room: {:?}",
            names(&full)
        );
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].1.as_str(), Some(PARENT), "the headers' own is kept");
        assert!(
            big.is_empty(),
            "a message it would make too big goes without"
        );
    }

    #[test]
    fn without_a_recorded_span_nothing_is_carried() {
        let mut attributes = Vec::new();
        carry_current(&mut attributes, |_| true);
        assert!(attributes.is_empty());
    }

    #[test]
    fn a_traceparent_reads_as_a_remote_sampled_context_and_writes_back_the_same() {
        let context = from_traceparent(PARENT, Some("vendor=value")).expect("well formed");
        assert_eq!(
            context.trace_id(),
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").expect("hex")
        );
        assert_eq!(
            context.span_id(),
            SpanId::from_hex("00f067aa0ba902b7").expect("hex")
        );
        assert!(context.is_sampled());
        assert!(context.is_remote());
        assert_eq!(context.trace_state().get("vendor"), Some("value"));
        assert_eq!(traceparent_of(&context), PARENT);
    }

    #[test]
    fn a_malformed_traceparent_is_no_context() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert!(from_traceparent(bad, None).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_later_traceparent_version_is_read_by_its_first_four_fields() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more";
        let context = from_traceparent(later, None).expect("read");
        assert!(!context.is_sampled());
    }

    #[test]
    fn an_xray_header_reads_as_the_same_trace_in_w3c_terms() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        let context = from_xray(header).expect("well formed");
        assert_eq!(
            context.trace_id(),
            TraceId::from_hex("5759e988bd862e3fe1be46a994272793").expect("hex")
        );
        assert_eq!(
            context.span_id(),
            SpanId::from_hex("53995c3f42cd8ad8").expect("hex")
        );
        assert!(context.is_sampled());
        let unsampled = "Parent=53995c3f42cd8ad8; Root=1-5759e988-bd862e3fe1be46a994272793";
        assert!(!from_xray(unsampled).expect("any order").is_sampled());
    }

    #[test]
    fn an_xray_header_without_a_root_or_parent_is_no_context() {
        for bad in [
            "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1",
            "Parent=53995c3f42cd8ad8;Sampled=1",
            "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
            "Root=1-5759e988-bd862e3fe1be46a99427279;Parent=53995c3f42cd8ad8",
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=0000000000000000",
        ] {
            assert!(from_xray(bad).is_none(), "{bad:?}");
        }
    }
}
