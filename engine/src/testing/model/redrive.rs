//! [`RedrivePolicy`]: a queue's `RedrivePolicy` attribute as SQS reads it, and the checks its
//! dead-letter queue passes. The messages themselves move in [`Messages`](super::Messages)
//! (`set_max_receive_count`, `take_redriven`, `store_redriven`); each front finds the
//! dead-letter queue by its ARN among its own queues.

use super::error::{ErrorKind, ModelError};
use crate::bounded::MaxReceiveCount;

/// Where a queue's messages go after `max_receive_count` receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedrivePolicy {
    /// The dead-letter queue's ARN.
    pub dead_letter_arn: String,
    /// The receives after which a receive moves a message to the dead-letter queue instead
    /// of handing it out: 1 to 1,000.
    pub max_receive_count: u32,
}

impl RedrivePolicy {
    /// Reads the value of a `RedrivePolicy` attribute: a JSON object with
    /// `deadLetterTargetArn` (a string) and `maxReceiveCount` (a number, or a number written
    /// as a string, as the console writes it).
    ///
    /// # Errors
    ///
    /// `InvalidAttributeValue` when the ARN is missing, or the count is missing or not 1 to
    /// 1,000.
    pub fn parse(value: &str) -> Result<Self, ModelError> {
        let invalid = |why: String| {
            ModelError::new(
                ErrorKind::InvalidAttributeValue,
                format!("the redrive policy `{value}` {why}"),
            )
        };
        let dead_letter_arn = json_value(value, "deadLetterTargetArn")
            .filter(|arn| !arn.is_empty())
            .ok_or_else(|| invalid("names no deadLetterTargetArn".to_owned()))?;
        let max_receive_count = json_value(value, "maxReceiveCount")
            .and_then(|count| count.parse::<u32>().ok())
            .filter(|count| MaxReceiveCount::contains(*count))
            .ok_or_else(|| {
                invalid(format!(
                    "needs a maxReceiveCount from {} to {}",
                    MaxReceiveCount::MIN,
                    MaxReceiveCount::MAX
                ))
            })?;
        Ok(Self {
            dead_letter_arn: dead_letter_arn.to_owned(),
            max_receive_count,
        })
    }

    /// Checks the dead-letter queue the policy of queue `queue` (FIFO when `fifo`) names:
    /// `target` is its name and whether it is FIFO, as the front found it by its ARN (`None`:
    /// no queue has that ARN). Answers the dead-letter queue's name.
    ///
    /// # Errors
    ///
    /// `InvalidAttributeValue` when no queue has the ARN, when it is the queue itself, or when
    /// it is not of the queue's kind (FIFO or standard), as SQS requires.
    pub fn check_target<'a>(
        &self,
        queue: &str,
        fifo: bool,
        target: Option<(&'a str, bool)>,
    ) -> Result<&'a str, ModelError> {
        let invalid = |why: String| ModelError::new(ErrorKind::InvalidAttributeValue, why);
        let Some((name, target_fifo)) = target else {
            return Err(invalid(format!(
                "the dead-letter queue `{}` does not exist",
                self.dead_letter_arn
            )));
        };
        if name == queue {
            return Err(invalid(format!(
                "the queue `{queue}` cannot be its own dead-letter queue"
            )));
        }
        if target_fifo != fifo {
            return Err(invalid(format!(
                "the dead-letter queue `{name}` is not of the same kind (FIFO or standard) as \
                 `{queue}`"
            )));
        }
        Ok(name)
    }
}

/// The value of `key` in a flat JSON object: `"key":"value"` or `"key":value`.
fn json_value<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let start = json.find(&format!("\"{key}\""))? + key.len() + 2;
    let rest = json[start..].trim_start().strip_prefix(':')?.trim_start();
    if let Some(quoted) = rest.strip_prefix('"') {
        quoted.split('"').next()
    } else {
        rest.split([',', '}']).next().map(str::trim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:sqs:us-east-1:000000000000:dlq";

    #[test]
    fn a_policy_reads_its_count_as_a_number_or_as_text() {
        for value in [
            format!(r#"{{"deadLetterTargetArn":"{ARN}","maxReceiveCount":3}}"#),
            format!(r#"{{ "maxReceiveCount" : "3", "deadLetterTargetArn" : "{ARN}" }}"#),
        ] {
            assert_eq!(
                RedrivePolicy::parse(&value),
                Ok(RedrivePolicy {
                    dead_letter_arn: ARN.to_owned(),
                    max_receive_count: 3,
                }),
                "{value}"
            );
        }
    }

    #[test]
    fn a_policy_without_a_target_or_a_count_in_range_is_refused() {
        for value in [
            r#"{"maxReceiveCount":3}"#.to_owned(),
            r#"{"deadLetterTargetArn":"","maxReceiveCount":3}"#.to_owned(),
            format!(r#"{{"deadLetterTargetArn":"{ARN}"}}"#),
            format!(r#"{{"deadLetterTargetArn":"{ARN}","maxReceiveCount":0}}"#),
            format!(r#"{{"deadLetterTargetArn":"{ARN}","maxReceiveCount":1001}}"#),
            format!(r#"{{"deadLetterTargetArn":"{ARN}","maxReceiveCount":"three"}}"#),
            "not json".to_owned(),
        ] {
            let error = RedrivePolicy::parse(&value).expect_err(&value);
            assert_eq!(error.kind, ErrorKind::InvalidAttributeValue, "{value}");
        }
    }

    #[test]
    fn the_target_exists_is_another_queue_and_of_the_same_kind() {
        let policy = RedrivePolicy {
            dead_letter_arn: ARN.to_owned(),
            max_receive_count: 3,
        };
        assert!(
            policy
                .check_target("orders", false, Some(("dlq", false)))
                .is_ok()
        );
        for (queue, fifo, target) in [
            ("orders", false, None),
            ("dlq", false, Some(("dlq", false))),
            ("orders", false, Some(("dlq", true))),
            ("orders.fifo", true, Some(("dlq", false))),
        ] {
            let error = policy.check_target(queue, fifo, target).expect_err(queue);
            assert_eq!(error.kind, ErrorKind::InvalidAttributeValue);
        }
    }
}
