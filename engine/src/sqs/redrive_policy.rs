//! A queue's `RedrivePolicy` attribute, read and written: the dead-letter queue's ARN and the
//! receives after which SQS moves a message there.

use std::fmt;

/// When the engine writes the redrive policy it declares (`max_attempts` + `dead_letter`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedriveWrite {
    /// Write it when the queue's own policy differs (a warning names the difference); leave
    /// the queue alone when it already has it. The default.
    #[default]
    WhenDifferent,
    /// Never write: the policy belongs to the infrastructure (Terraform, CloudFormation). The
    /// engine refuses to start when the queue's policy differs from the declared one, and
    /// needs no `sqs:SetQueueAttributes`.
    Never,
}

/// A redrive policy as SQS stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RedrivePolicy {
    pub(crate) dead_letter_arn: String,
    pub(crate) max_receive_count: u32,
}

impl RedrivePolicy {
    /// Reads the JSON of the `RedrivePolicy` attribute: `deadLetterTargetArn` and
    /// `maxReceiveCount` (a number, or a number in a string, as SQS answers either). `None`
    /// when either is missing or malformed.
    pub(crate) fn parse(json: &str) -> Option<Self> {
        let dead_letter_arn = string_field(json, "deadLetterTargetArn")?;
        let max_receive_count = number_field(json, "maxReceiveCount")?;
        Some(Self {
            dead_letter_arn,
            max_receive_count,
        })
    }

    /// The JSON SQS takes.
    pub(crate) fn to_json(&self) -> String {
        format!(
            r#"{{"deadLetterTargetArn":"{}","maxReceiveCount":"{}"}}"#,
            self.dead_letter_arn, self.max_receive_count
        )
    }
}

impl fmt::Display for RedrivePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "maxReceiveCount {} to {}",
            self.max_receive_count, self.dead_letter_arn
        )
    }
}

/// The text after `"key"` and its colon, spaces skipped.
fn after_key<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let start = json.find(&format!("\"{key}\""))? + key.len() + 2;
    let rest = json[start..].trim_start().strip_prefix(':')?;
    Some(rest.trim_start())
}

fn string_field(json: &str, key: &str) -> Option<String> {
    let rest = after_key(json, key)?.strip_prefix('"')?;
    let end = rest.find('"')?;
    Some(rest[..end].to_owned())
}

fn number_field(json: &str, key: &str) -> Option<u32> {
    let rest = after_key(json, key)?;
    let rest = rest.strip_prefix('"').unwrap_or(rest);
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_sqs_answers_are_read() {
        let expected = RedrivePolicy {
            dead_letter_arn: "arn:aws:sqs:us-east-1:000000000000:dead".into(),
            max_receive_count: 5,
        };
        for json in [
            r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dead","maxReceiveCount":5}"#,
            r#"{"maxReceiveCount": "5", "deadLetterTargetArn" : "arn:aws:sqs:us-east-1:000000000000:dead"}"#,
        ] {
            assert_eq!(RedrivePolicy::parse(json), Some(expected.clone()), "{json}");
        }
        assert_eq!(RedrivePolicy::parse(&expected.to_json()), Some(expected));
    }

    #[test]
    fn a_policy_missing_a_half_is_none() {
        assert_eq!(RedrivePolicy::parse(r#"{"maxReceiveCount":5}"#), None);
        assert_eq!(RedrivePolicy::parse(r#"{"deadLetterTargetArn":"x"}"#), None);
        assert_eq!(RedrivePolicy::parse(""), None);
    }
}
