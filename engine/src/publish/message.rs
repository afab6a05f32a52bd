//! A message to publish ([`OutgoingMessage`]) and the checks that make it a batch entry SQS
//! takes as it is.

use super::error::PublishError;
use crate::api::SendEntry;
use crate::attribute::{AttributeValue, MessageAttribute};
use crate::limits::{MAX_MESSAGE_ATTRIBUTES, valid_attribute_name, valid_text};

/// A message to publish: its body, its message attributes, and on a FIFO queue its group and
/// deduplication id.
///
/// ```
/// use sqs_engine::OutgoingMessage;
///
/// let message = OutgoingMessage::new(r#"{"order":7}"#)
///     .string_attribute("kind", "order-placed")
///     .group_id("account-42");
/// assert_eq!(message.body(), r#"{"order":7}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct OutgoingMessage {
    body: String,
    attributes: Vec<(String, MessageAttribute)>,
    group_id: Option<String>,
    deduplication_id: Option<String>,
}

impl OutgoingMessage {
    /// A message with `body`: text SQS takes (no C0 controls but tab, LF and CR), not empty.
    pub fn new(body: impl Into<String>) -> Self {
        Self {
            body: body.into(),
            attributes: Vec::new(),
            group_id: None,
            deduplication_id: None,
        }
    }

    /// A message of `body` with `attributes` as they are, for a caller that builds them
    /// itself; [`into_entry`](Self::into_entry) checks them all the same.
    #[cfg(feature = "ruststream")]
    pub(crate) fn with_attributes(
        body: String,
        attributes: Vec<(String, MessageAttribute)>,
    ) -> Self {
        Self {
            body,
            attributes,
            group_id: None,
            deduplication_id: None,
        }
    }

    /// The body.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// Adds a message attribute (at most ten, none with an empty value); a second one of the
    /// same name replaces the first.
    pub fn attribute(mut self, name: impl Into<String>, attribute: MessageAttribute) -> Self {
        let name = name.into();
        self.attributes.retain(|(known, _)| *known != name);
        self.attributes.push((name, attribute));
        self
    }

    /// Adds a `String` message attribute.
    pub fn string_attribute(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.attribute(
            name,
            MessageAttribute {
                data_type: "String".into(),
                value: AttributeValue::String(value.into()),
            },
        )
    }

    /// The message group, on a FIFO queue (required there): messages of one group are
    /// delivered in order, one at a time.
    pub fn group_id(mut self, group: impl Into<String>) -> Self {
        self.group_id = Some(group.into());
        self
    }

    /// The deduplication id, on a FIFO queue: SQS drops a second send with it for five
    /// minutes. Default: a unique id per message.
    pub fn deduplication_id(mut self, id: impl Into<String>) -> Self {
        self.deduplication_id = Some(id.into());
        self
    }

    /// The batch entry for `destination` (FIFO when `fifo`) and its size, with `unique` as the
    /// deduplication id a FIFO message names none of, or the refusal of a message SQS would
    /// refuse or alter. `max_bytes` is the largest message the destination takes.
    pub(crate) fn into_entry(
        self,
        destination: &str,
        fifo: bool,
        unique: impl FnOnce() -> String,
        max_bytes: usize,
    ) -> Result<(SendEntry, usize), PublishError> {
        let refused = |reason: String| PublishError::Refused {
            destination: destination.to_owned(),
            reason,
        };
        if self.body.is_empty() {
            return Err(refused(
                "the body must not be empty: SQS refuses an empty message".into(),
            ));
        }
        if !valid_text(&self.body) {
            return Err(refused(
                "the body holds characters SQS refuses (C0 controls but tab, LF and CR, \
                 U+FFFE, U+FFFF)"
                    .into(),
            ));
        }
        if self.attributes.len() > MAX_MESSAGE_ATTRIBUTES {
            return Err(refused(format!(
                "{} message attributes: SQS carries at most {MAX_MESSAGE_ATTRIBUTES} message attributes",
                self.attributes.len()
            )));
        }
        for (name, attribute) in &self.attributes {
            if !valid_attribute_name(name) {
                return Err(refused(format!(
                    "message attribute `{name}` has a name SQS refuses: 1 to 256 ASCII letters, \
                     digits, `_`, `-` and inner single `.`, not starting with `AWS.` or `Amazon.`"
                )));
            }
            let taken = match &attribute.value {
                AttributeValue::String(value) => !value.is_empty() && valid_text(value),
                AttributeValue::Binary(value) => !value.is_empty(),
            };
            if !taken {
                return Err(refused(format!(
                    "message attribute `{name}` is empty or holds text SQS refuses"
                )));
            }
        }
        #[cfg_attr(
            not(feature = "opentelemetry"),
            expect(
                unused_mut,
                reason = "the trace context is added with feature opentelemetry"
            )
        )]
        let mut attributes = self.attributes;
        // The current span's trace context, where the message sets none and it fits.
        #[cfg(feature = "opentelemetry")]
        crate::handle::trace_context::carry_current(&mut attributes, |attributes| {
            SendEntry::size_of(&self.body, attributes) <= max_bytes
        });
        let bytes = SendEntry::size_of(&self.body, &attributes);
        if bytes > max_bytes {
            return Err(refused(format!(
                "the message is {bytes} bytes, the destination takes at most {max_bytes}"
            )));
        }
        let (group_id, deduplication_id) = if fifo {
            let group = self.group_id.ok_or_else(|| {
                refused("a FIFO queue needs a message group: OutgoingMessage::group_id".into())
            })?;
            check_id(destination, "group_id", &group)?;
            let dedup = match self.deduplication_id {
                Some(dedup) => {
                    check_id(destination, "deduplication_id", &dedup)?;
                    dedup
                }
                None => unique(),
            };
            (Some(group), Some(dedup))
        } else {
            let not_fifo = |setting| PublishError::NotFifo {
                destination: destination.to_owned(),
                setting,
            };
            if self.group_id.is_some() {
                return Err(not_fifo("group_id"));
            }
            if self.deduplication_id.is_some() {
                return Err(not_fifo("deduplication_id"));
            }
            (None, None)
        };
        let entry = SendEntry {
            body: self.body,
            attributes,
            group_id,
            deduplication_id,
        };
        Ok((entry, bytes))
    }
}

/// A group or deduplication id, checked: 1 to 128 characters, ASCII letters, digits and
/// punctuation.
///
/// # Errors
///
/// [`PublishError::Refused`] naming `setting` for any other id.
pub(crate) fn check_id(
    destination: &str,
    setting: &'static str,
    id: &str,
) -> Result<(), PublishError> {
    if !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(PublishError::Refused {
            destination: destination.to_owned(),
            reason: format!(
                "{setting} `{id}` is not 1 to 128 ASCII letters, digits and punctuation"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MAX_MESSAGE_BYTES;

    fn entry(message: OutgoingMessage, fifo: bool) -> Result<SendEntry, PublishError> {
        message
            .into_entry("q", fifo, || "unique".into(), MAX_MESSAGE_BYTES)
            .map(|(entry, _)| entry)
    }

    fn refusal(result: Result<SendEntry, PublishError>) -> String {
        match result {
            Err(PublishError::Refused { reason, .. }) => reason,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_message_sqs_would_refuse_is_refused_before_it_is_sent() {
        assert!(refusal(entry(OutgoingMessage::new(""), false)).contains("empty"));
        assert!(refusal(entry(OutgoingMessage::new("\u{1}"), false)).contains("characters"));
        let crowded = (0..11).fold(OutgoingMessage::new("x"), |message, n| {
            message.string_attribute(format!("a{n}"), "v")
        });
        assert!(refusal(entry(crowded, false)).contains("at most 10"));
        let blank = OutgoingMessage::new("x").string_attribute("a", "");
        assert!(refusal(entry(blank, false)).contains("`a`"));
        let bell = OutgoingMessage::new("x").string_attribute("a", "\u{7}");
        assert!(refusal(entry(bell, false)).contains("`a`"));
        for name in ["has space", "AWS.thing", ""] {
            let named = OutgoingMessage::new("x").string_attribute(name, "v");
            assert!(
                refusal(entry(named, false)).contains("name SQS refuses"),
                "{name}"
            );
        }
        let big = OutgoingMessage::new("x".repeat(MAX_MESSAGE_BYTES + 1));
        assert!(refusal(entry(big, false)).contains("at most 1048576"));
        let no_group = OutgoingMessage::new("x");
        assert!(refusal(entry(no_group, true)).contains("group"));
        let bad_id = OutgoingMessage::new("x").group_id("a b");
        assert!(refusal(entry(bad_id, true)).contains("group_id"));
    }

    #[cfg(feature = "opentelemetry")]
    #[test]
    fn a_message_sent_in_a_traced_span_carries_its_context() {
        let sent = crate::handle::trace_context::tests::in_traced_span(|| {
            entry(OutgoingMessage::new("x"), false)
        })
        .expect("entry");
        let names: Vec<&str> = sent
            .attributes
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        assert_eq!(names, ["traceparent"]);
        let untraced = entry(OutgoingMessage::new("x"), false).expect("entry");
        assert!(untraced.attributes.is_empty(), "no span, no context");
    }

    #[test]
    fn fifo_settings_on_a_standard_queue_are_refused_by_name() {
        for (message, setting) in [
            (OutgoingMessage::new("x").group_id("g"), "group_id"),
            (
                OutgoingMessage::new("x").deduplication_id("d"),
                "deduplication_id",
            ),
        ] {
            match entry(message, false) {
                Err(PublishError::NotFifo { setting: named, .. }) => assert_eq!(named, setting),
                other => panic!("expected NotFifo, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_fifo_message_gets_its_group_and_a_unique_deduplication_id_unless_it_names_one() {
        let sent = entry(OutgoingMessage::new("x").group_id("g"), true).expect("entry");
        assert_eq!(sent.group_id.as_deref(), Some("g"));
        assert_eq!(sent.deduplication_id.as_deref(), Some("unique"));
        let named = OutgoingMessage::new("x")
            .group_id("g")
            .deduplication_id("d");
        let sent = entry(named, true).expect("entry");
        assert_eq!(sent.deduplication_id.as_deref(), Some("d"));
        let replaced = OutgoingMessage::new("x")
            .string_attribute("a", "1")
            .string_attribute("a", "2");
        let sent = entry(replaced, false).expect("entry");
        assert_eq!(sent.attributes.len(), 1);
        assert_eq!(sent.attributes[0].1.as_str(), Some("2"));
    }
}
