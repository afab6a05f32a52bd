//! The JSON notification SNS delivers to an SQS subscription without raw message delivery:
//! the published message wrapped, with its topic, id, time and message attributes, as the
//! queue's message body (the queue message itself then carries no message attributes).
//!
//! The embedded server signs nothing: `Signature` is empty and the certificate and
//! unsubscribe URLs point nowhere useful. A consumer that verifies signatures refuses it.

use std::fmt::Write as _;

use serde::Serialize;

use super::protocol::MessageAttributes;

/// One message attribute, as the envelope carries it.
#[derive(Debug, Serialize)]
struct EnvelopeAttribute<'a> {
    /// `String`, `Number`, `Binary`, with any custom suffix.
    #[serde(rename = "Type")]
    data_type: &'a str,
    /// The value; a binary one in base64.
    #[serde(rename = "Value")]
    value: &'a str,
}

/// The envelope.
#[derive(Debug, Serialize)]
struct Envelope<'a> {
    #[serde(rename = "Type")]
    kind: &'static str,
    #[serde(rename = "MessageId")]
    message_id: &'a str,
    #[serde(rename = "TopicArn")]
    topic_arn: &'a str,
    #[serde(rename = "Subject", skip_serializing_if = "Option::is_none")]
    subject: Option<&'a str>,
    #[serde(rename = "Message")]
    message: &'a str,
    #[serde(rename = "Timestamp")]
    timestamp: String,
    #[serde(rename = "SignatureVersion")]
    signature_version: &'static str,
    #[serde(rename = "Signature")]
    signature: &'static str,
    #[serde(rename = "SigningCertURL")]
    signing_cert_url: &'static str,
    #[serde(rename = "UnsubscribeURL")]
    unsubscribe_url: String,
    #[serde(rename = "MessageAttributes", skip_serializing_if = "Vec::is_empty")]
    #[serde(serialize_with = "as_map")]
    message_attributes: Vec<(&'a str, EnvelopeAttribute<'a>)>,
}

/// Serializes name-value pairs as a JSON object.
fn as_map<S: serde::Serializer>(
    pairs: &[(&str, EnvelopeAttribute<'_>)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(pairs.iter().map(|(name, value)| (name, value)))
}

/// What a notification is made of.
#[derive(Debug)]
pub(crate) struct Published<'a> {
    /// The id the publish answered.
    pub(crate) message_id: &'a str,
    /// The topic's ARN.
    pub(crate) topic_arn: &'a str,
    /// The subscription's ARN.
    pub(crate) subscription_arn: &'a str,
    /// The publish's subject, if any.
    pub(crate) subject: Option<&'a str>,
    /// The published message.
    pub(crate) message: &'a str,
    /// Its message attributes.
    pub(crate) attributes: &'a MessageAttributes,
    /// When it was published, in epoch milliseconds.
    pub(crate) published_millis: u64,
}

/// The body SNS delivers for `published` to a subscription without raw delivery.
pub(crate) fn notification(published: &Published<'_>) -> String {
    let envelope = Envelope {
        kind: "Notification",
        message_id: published.message_id,
        topic_arn: published.topic_arn,
        subject: published.subject,
        message: published.message,
        timestamp: iso8601(published.published_millis),
        signature_version: "1",
        signature: "",
        signing_cert_url: "",
        unsubscribe_url: format!(
            "?Action=Unsubscribe&SubscriptionArn={}",
            published.subscription_arn
        ),
        message_attributes: published
            .attributes
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str(),
                    EnvelopeAttribute {
                        data_type: &value.data_type,
                        value: value
                            .string_value
                            .as_deref()
                            .or(value.binary_value.as_deref())
                            .unwrap_or_default(),
                    },
                )
            })
            .collect(),
    };
    serde_json::to_string(&envelope).unwrap_or_default()
}

/// `millis` since the epoch as UTC in ISO 8601 with milliseconds
/// (`2026-12-01T06:47:54.123Z`), as SNS writes its timestamps.
pub(crate) fn iso8601(millis: u64) -> String {
    let secs = millis / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX);
    let of_day = secs % 86_400;
    // Days since 1970-01-01 to a civil date (proleptic Gregorian), by 400-year eras.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    let mut out = String::with_capacity(24);
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        millis % 1000
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_in_iso_8601() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29, a leap day of a century divisible by 400.
        assert_eq!(iso8601(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso8601(1_796_107_674_500), "2026-12-01T06:47:54.500Z");
    }
}
