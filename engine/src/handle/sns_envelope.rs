//! The SNS notification a queue receives from a topic subscription without raw message
//! delivery: the published message and its attributes wrapped in a JSON envelope, which
//! [`Message::sns_notification`](crate::Message::sns_notification) unwraps.

use std::collections::HashMap;

use base64::Engine as _;
use serde::Deserialize;

use crate::attribute::{AttributeValue, MessageAttribute};

/// A message published to an SNS topic, as the topic delivered it to the queue: the body SQS
/// holds is this envelope, and the message's own attributes travel inside it.
///
/// The envelope's signature is not checked: SQS received it from SNS, and the queue's access
/// policy decides which topics may send to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnsNotification {
    /// The id SNS gave the publish (not the SQS message id).
    pub message_id: String,
    /// The topic it was published to.
    pub topic_arn: String,
    /// The subject the publisher gave, if any.
    pub subject: Option<String>,
    /// The published message.
    pub message: String,
    /// When SNS accepted the publish, as SNS writes it (ISO 8601, UTC, such as
    /// `2026-12-04T18:00:00.000Z`).
    pub timestamp: String,
    /// The message attributes of the publish. A `Binary` attribute's value is decoded from
    /// the envelope's base64; `String`, `Number` and `String.Array` ones keep their text.
    pub message_attributes: HashMap<String, MessageAttribute>,
}

/// Why a body is not an SNS notification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnsEnvelopeError {
    /// The body is not a JSON object: the message was sent to the queue directly, or by a
    /// subscription with raw message delivery.
    #[error("the body is not an SNS notification (not JSON: {reason})")]
    NotJson {
        /// What the JSON parser said.
        reason: String,
    },
    /// The body is an SNS message of another type, such as `SubscriptionConfirmation`.
    #[error("the body is an SNS message of type {kind:?}, not a notification")]
    NotANotification {
        /// The envelope's `Type`.
        kind: String,
    },
    /// A field every notification carries is missing or not text.
    #[error("the SNS notification has no {field:?} text field")]
    MissingField {
        /// The field's name in the envelope.
        field: &'static str,
    },
    /// A message attribute whose value cannot be read, such as a `Binary` one that is not
    /// base64.
    #[error("the SNS notification's attribute {name:?} is unreadable: {reason}")]
    BadAttribute {
        /// The attribute's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// The envelope's fields as SNS names them; any other field is ignored.
#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "Type")]
    kind: Option<String>,
    #[serde(rename = "MessageId")]
    message_id: Option<String>,
    #[serde(rename = "TopicArn")]
    topic_arn: Option<String>,
    #[serde(rename = "Subject")]
    subject: Option<String>,
    #[serde(rename = "Message")]
    message: Option<String>,
    #[serde(rename = "Timestamp")]
    timestamp: Option<String>,
    #[serde(rename = "MessageAttributes", default)]
    message_attributes: HashMap<String, EnvelopeAttribute>,
}

/// One message attribute inside the envelope.
#[derive(Deserialize)]
struct EnvelopeAttribute {
    #[serde(rename = "Type")]
    data_type: String,
    #[serde(rename = "Value")]
    value: String,
}

/// Reads `body` as an SNS notification.
///
/// # Errors
///
/// [`SnsEnvelopeError`] when `body` is not JSON, is an SNS message of another type, lacks a
/// field every notification has, or carries an unreadable attribute.
pub(crate) fn unwrap(body: &str) -> Result<SnsNotification, SnsEnvelopeError> {
    let envelope: Envelope =
        serde_json::from_str(body).map_err(|error| SnsEnvelopeError::NotJson {
            reason: error.to_string(),
        })?;
    let kind = envelope
        .kind
        .ok_or(SnsEnvelopeError::MissingField { field: "Type" })?;
    if kind != "Notification" {
        return Err(SnsEnvelopeError::NotANotification { kind });
    }
    let field =
        |value: Option<String>, field| value.ok_or(SnsEnvelopeError::MissingField { field });
    let message_attributes = envelope
        .message_attributes
        .into_iter()
        .map(|(name, attribute)| {
            let value = if attribute.data_type.starts_with("Binary") {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(&attribute.value)
                    .map_err(|error| SnsEnvelopeError::BadAttribute {
                        name: name.clone(),
                        reason: format!("a Binary value that is not base64 ({error})"),
                    })?;
                AttributeValue::Binary(bytes)
            } else {
                AttributeValue::String(attribute.value)
            };
            Ok((
                name,
                MessageAttribute {
                    data_type: attribute.data_type,
                    value,
                },
            ))
        })
        .collect::<Result<_, SnsEnvelopeError>>()?;
    Ok(SnsNotification {
        message_id: field(envelope.message_id, "MessageId")?,
        topic_arn: field(envelope.topic_arn, "TopicArn")?,
        subject: envelope.subject,
        message: field(envelope.message, "Message")?,
        timestamp: field(envelope.timestamp, "Timestamp")?,
        message_attributes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An envelope as SNS writes it, with `attributes` as its `MessageAttributes` object.
    fn envelope(attributes: &str) -> String {
        format!(
            r#"{{"Type":"Notification","MessageId":"5c1e2f1a","TopicArn":"arn:aws:sns:eu-west-1:123456789012:orders","Subject":"new order","Message":"{{\"order\":7}}","Timestamp":"2026-12-04T18:00:00.000Z","SignatureVersion":"1","Signature":"c2ln","SigningCertURL":"https://sns.example/cert.pem","UnsubscribeURL":"https://sns.example/unsubscribe","MessageAttributes":{attributes}}}"#
        )
    }

    #[test]
    fn a_notification_unwraps_to_its_message_subject_topic_and_attributes() {
        let body = envelope(
            r#"{"kind":{"Type":"String","Value":"order"},"count":{"Type":"Number","Value":"3"},"blob":{"Type":"Binary","Value":"AAEC"},"tags":{"Type":"String.Array","Value":"[\"a\",\"b\"]"}}"#,
        );
        let notification = unwrap(&body).expect("a notification");
        assert_eq!(notification.message, r#"{"order":7}"#);
        assert_eq!(notification.message_id, "5c1e2f1a");
        assert_eq!(
            notification.topic_arn,
            "arn:aws:sns:eu-west-1:123456789012:orders"
        );
        assert_eq!(notification.subject.as_deref(), Some("new order"));
        assert_eq!(notification.timestamp, "2026-12-04T18:00:00.000Z");
        let attribute = |name: &str| notification.message_attributes[name].clone();
        assert_eq!(attribute("kind").as_str(), Some("order"));
        assert_eq!(attribute("count").data_type, "Number");
        assert_eq!(attribute("count").as_str(), Some("3"));
        assert_eq!(
            attribute("blob").value,
            AttributeValue::Binary(vec![0, 1, 2])
        );
        assert_eq!(attribute("tags").as_str(), Some(r#"["a","b"]"#));
    }

    #[test]
    fn a_notification_without_subject_or_attributes_unwraps() {
        let body = r#"{"Type":"Notification","MessageId":"m","TopicArn":"t","Message":"hello","Timestamp":"2026-12-04T18:00:00.000Z"}"#;
        let notification = unwrap(body).expect("a notification");
        assert_eq!(notification.message, "hello");
        assert_eq!(notification.subject, None);
        assert!(notification.message_attributes.is_empty());
    }

    #[test]
    fn a_body_that_is_not_an_envelope_is_a_clear_error() {
        assert!(matches!(
            unwrap("plain text sent to the queue"),
            Err(SnsEnvelopeError::NotJson { .. })
        ));
        let confirmation = r#"{"Type":"SubscriptionConfirmation","MessageId":"m","TopicArn":"t","Message":"confirm","Timestamp":"x"}"#;
        assert_eq!(
            unwrap(confirmation),
            Err(SnsEnvelopeError::NotANotification {
                kind: "SubscriptionConfirmation".to_owned()
            })
        );
        let no_message =
            r#"{"Type":"Notification","MessageId":"m","TopicArn":"t","Timestamp":"x"}"#;
        assert_eq!(
            unwrap(no_message),
            Err(SnsEnvelopeError::MissingField { field: "Message" })
        );
        assert_eq!(
            unwrap(r#"{"order":7}"#),
            Err(SnsEnvelopeError::MissingField { field: "Type" })
        );
    }

    #[test]
    fn a_binary_attribute_that_is_not_base64_is_named_in_the_error() {
        let body = envelope(r#"{"blob":{"Type":"Binary","Value":"not base64!"}}"#);
        match unwrap(&body) {
            Err(SnsEnvelopeError::BadAttribute { name, .. }) => assert_eq!(name, "blob"),
            other => panic!("expected a bad attribute, got {other:?}"),
        }
    }
}
