//! The statement of a queue's access policy that lets a topic deliver to the queue (feature
//! `sns`).
//!
//! SNS sends to a subscribed queue as the service principal `sns.amazonaws.com`, and the queue
//! takes the message only if its access policy allows that principal `sqs:SendMessage` for the
//! topic. The policy belongs to whoever runs the queue, so the grant is added to it as one more
//! statement, never written over it, and not added again when a statement already allows the
//! topic.

use serde_json::{Map, Value, json};

/// The principal SNS delivers as.
const SNS_PRINCIPAL: &str = "sns.amazonaws.com";

/// The policy with a statement that lets `topic_arn` deliver to `queue_arn`: `None` when
/// `current` allows it already, else the whole policy to write back.
///
/// # Errors
///
/// A policy that is not a JSON object, or whose `Statement` is neither a statement nor a list
/// of them: the operator's document is not rewritten blind.
pub(crate) fn with_topic_grant(
    current: Option<&str>,
    queue_arn: &str,
    topic_arn: &str,
) -> Result<Option<String>, String> {
    let mut policy = match current.map(str::trim) {
        Some(text) if !text.is_empty() => serde_json::from_str::<Value>(text)
            .map_err(|error| format!("the queue's policy is not JSON: {error}"))?,
        _ => json!({ "Version": "2012-10-17" }),
    };
    let Some(document) = policy.as_object_mut() else {
        return Err("the queue's policy is not a JSON object".to_owned());
    };
    let mut statements = match document.remove("Statement") {
        None => Vec::new(),
        Some(Value::Array(statements)) => statements,
        Some(statement @ Value::Object(_)) => vec![statement],
        Some(_) => return Err("the queue's policy has a Statement of no known shape".to_owned()),
    };
    if statements
        .iter()
        .any(|statement| allows(statement, topic_arn))
    {
        return Ok(None);
    }
    let sid: String = topic_arn
        .rsplit(':')
        .next()
        .unwrap_or(topic_arn)
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    statements.push(json!({
        "Sid": format!("DeliverFromTopic{sid}{}", statements.len()),
        "Effect": "Allow",
        "Principal": { "Service": SNS_PRINCIPAL },
        "Action": "sqs:SendMessage",
        "Resource": queue_arn,
        "Condition": { "ArnEquals": { "aws:SourceArn": topic_arn } },
    }));
    document.insert("Statement".to_owned(), Value::Array(statements));
    Ok(Some(policy.to_string()))
}

/// Whether `statement` allows SNS to send to the queue for `topic_arn`.
fn allows(statement: &Value, topic_arn: &str) -> bool {
    let Some(statement) = statement.as_object() else {
        return false;
    };
    statement.get("Effect").and_then(Value::as_str) == Some("Allow")
        && names(statement.get("Action"), |action| {
            matches!(action, "sqs:SendMessage" | "sqs:*" | "*")
        })
        && principal_is_sns(statement.get("Principal"))
        && source_is(
            statement.get("Condition").and_then(Value::as_object),
            topic_arn,
        )
}

/// Whether `value` (a string or a list of them) holds one that `matches`.
fn names(value: Option<&Value>, matches: impl Fn(&str) -> bool) -> bool {
    match value {
        Some(Value::String(one)) => matches(one),
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).any(matches),
        _ => false,
    }
}

fn principal_is_sns(principal: Option<&Value>) -> bool {
    match principal {
        Some(Value::String(any)) => any == "*",
        Some(Value::Object(principal)) => {
            names(principal.get("Service"), |service| service == SNS_PRINCIPAL)
                || names(principal.get("AWS"), |aws| aws == "*")
        }
        _ => false,
    }
}

fn source_is(condition: Option<&Map<String, Value>>, topic_arn: &str) -> bool {
    let Some(condition) = condition else {
        return false;
    };
    ["ArnEquals", "ArnLike"].iter().any(|operator| {
        condition
            .get(*operator)
            .and_then(Value::as_object)
            .and_then(|keys| keys.get("aws:SourceArn"))
            .is_some_and(|arn| names(Some(arn), |arn| arn == topic_arn))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUEUE: &str = "arn:aws:sqs:us-east-1:000000000000:billing";
    const TOPIC: &str = "arn:aws:sns:us-east-1:000000000000:order-events";

    fn statements(policy: &str) -> Vec<Value> {
        let policy: Value = serde_json::from_str(policy).expect("JSON");
        policy["Statement"].as_array().expect("a list").clone()
    }

    #[test]
    fn a_queue_without_a_policy_gets_one_statement_for_the_topic() {
        let policy = with_topic_grant(None, QUEUE, TOPIC)
            .expect("written")
            .expect("a grant");
        let statements = statements(&policy);
        assert_eq!(statements.len(), 1);
        assert_eq!(statements[0]["Principal"]["Service"], SNS_PRINCIPAL);
        assert_eq!(statements[0]["Resource"], QUEUE);
        assert_eq!(
            statements[0]["Condition"]["ArnEquals"]["aws:SourceArn"],
            TOPIC
        );
    }

    #[test]
    fn a_granted_topic_is_not_written_again_and_other_statements_are_kept() {
        let first = with_topic_grant(None, QUEUE, TOPIC)
            .expect("written")
            .expect("a grant");
        assert_eq!(with_topic_grant(Some(&first), QUEUE, TOPIC), Ok(None));

        let other = "arn:aws:sns:us-east-1:000000000000:refunds";
        let second = with_topic_grant(Some(&first), QUEUE, other)
            .expect("written")
            .expect("a grant");
        let statements = statements(&second);
        assert_eq!(statements.len(), 2, "{second}");
        assert_ne!(statements[0]["Sid"], statements[1]["Sid"]);
        assert_eq!(with_topic_grant(Some(&second), QUEUE, TOPIC), Ok(None));
        assert_eq!(with_topic_grant(Some(&second), QUEUE, other), Ok(None));
    }

    #[test]
    fn an_operators_single_statement_is_kept_and_a_deny_grants_nothing() {
        let operator = json!({
            "Version": "2012-10-17",
            "Statement": {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:SendMessage",
                "Condition": { "ArnEquals": { "aws:SourceArn": TOPIC } },
            },
        })
        .to_string();
        let policy = with_topic_grant(Some(&operator), QUEUE, TOPIC)
            .expect("written")
            .expect("a deny is no grant");
        let statements = statements(&policy);
        assert_eq!(statements.len(), 2);
        assert_eq!(statements[0]["Effect"], "Deny");
        assert!(with_topic_grant(Some("[]"), QUEUE, TOPIC).is_err());
        assert!(with_topic_grant(Some("not json"), QUEUE, TOPIC).is_err());
    }
}
