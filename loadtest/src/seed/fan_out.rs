//! The fan-out variant of `seed-payments` (`--fan-out`): what the parent sets up for it, and
//! which calls are SNS's.
//!
//! Each payment booked is published to the SNS topic `payments-booked`, which delivers it, raw,
//! to the queues `ledger` and `payment-notices`, each consumed by a subscriber of the service
//! (`fan_out_service.rs`). The service subscribes the queues to the topic after it starts, as
//! the brokers' fan-out examples do on every start; but its subscribers start first, and a
//! payment booked before the subscriptions exist would reach no queue. So the parent provisions
//! the topic and the two raw subscriptions before the service starts, as an operator would (not
//! counted: they precede the run's mark and go around the counting proxy), and the service's own
//! wiring finds them in place (`CreateTopic` and `Subscribe` answer the existing ones), writing
//! each queue's policy grant for the topic, which the queues are created without.

use anyhow::{Context as _, Result};
use aws_config::SdkConfig;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::QueueAttributeName;

use super::brokers::sqs_engine_fan_out::{SUBSCRIBED, TOPIC};

/// Whether `action` is an SNS action (every other one the run counts is SQS's).
pub(crate) fn is_sns(action: &str) -> bool {
    crate::server::SNS_ACTIONS.contains(&action)
}

/// The queues of the run, created new (deleted first when they exist, with whatever policy
/// an earlier run wrote): `payments`, then the subscribed queues, by name and URL; and the
/// topic, with each subscribed queue subscribed to it with raw message delivery.
///
/// # Errors
///
/// When a queue or the topic cannot be made, or a subscription is refused.
pub(crate) async fn prepare(config: &SdkConfig, sqs: &Client) -> Result<Vec<(String, String)>> {
    let mut queues = Vec::new();
    for name in std::iter::once("payments").chain(SUBSCRIBED) {
        if let Ok(found) = sqs.get_queue_url().queue_name(name).send().await
            && let Some(url) = found.queue_url
        {
            sqs.delete_queue()
                .queue_url(url)
                .send()
                .await
                .map_err(|e| anyhow::anyhow!("DeleteQueue {name}: {}", DisplayErrorContext(e)))?;
        }
        let url = sqs
            .create_queue()
            .queue_name(name)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("CreateQueue {name}: {}", DisplayErrorContext(e)))?
            .queue_url
            .with_context(|| format!("CreateQueue {name} answered no URL"))?;
        queues.push((name.to_owned(), url));
    }
    let sns = aws_sdk_sns::Client::new(config);
    let topic = sns
        .create_topic()
        .name(TOPIC)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("CreateTopic {TOPIC}: {}", DisplayErrorContext(e)))?
        .topic_arn
        .with_context(|| format!("CreateTopic {TOPIC} answered no ARN"))?;
    for (name, url) in queues.iter().skip(1) {
        let arn = sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("GetQueueAttributes {name}: {}", DisplayErrorContext(e)))?
            .attributes
            .and_then(|mut attributes| attributes.remove(&QueueAttributeName::QueueArn))
            .with_context(|| format!("queue {name} has no ARN"))?;
        sns.subscribe()
            .topic_arn(&topic)
            .protocol("sqs")
            .endpoint(arn)
            .attributes("RawMessageDelivery", "true")
            .send()
            .await
            .map_err(|e| {
                anyhow::anyhow!("Subscribe {name} to {TOPIC}: {}", DisplayErrorContext(e))
            })?;
    }
    Ok(queues)
}

/// Deletes the topic (on LocalStack, after a run: the account is the run's own).
pub(crate) async fn delete_topic(config: &SdkConfig) {
    let sns = aws_sdk_sns::Client::new(config);
    if let Ok(created) = sns.create_topic().name(TOPIC).send().await
        && let Some(arn) = created.topic_arn
    {
        let _ = sns.delete_topic().topic_arn(arn).send().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sns_actions_are_told_from_the_sqs_ones() {
        for action in ["CreateTopic", "Subscribe", "Publish", "PublishBatch"] {
            assert!(is_sns(action), "{action}");
        }
        for action in ["ReceiveMessage", "DeleteMessageBatch", "SetQueueAttributes"] {
            assert!(!is_sns(action), "{action}");
        }
    }
}
