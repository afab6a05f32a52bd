//! The `sqs` and `sns` bindings of the channels a broker's subscriptions read and its publish
//! positions write, for the framework's AsyncAPI document (feature `asyncapi`).
//!
//! Everything is read off the declarations, before anything connects: a queue's or topic's
//! name, whether it is FIFO (the `.fifo` suffix says so), and the polling settings a
//! subscription names. What only the service knows (a queue's ARN, its retention, the timeout
//! it carries when the subscription names none, its access policy) stays out. The bindings are
//! the ones `ruststream-sqs-sns` writes for the same service.

use ::ruststream::asyncapi::{Binding, Bindings};
use serde::Serialize;

use super::queue::{SqsQueue, is_fifo};

/// The version of the `sqs` bindings written here.
const SQS_BINDING_VERSION: &str = "0.3.0";
/// The version of the `sns` bindings written here.
#[cfg(feature = "sns")]
const SNS_BINDING_VERSION: &str = "1.0.0";

/// The `sqs` channel binding: `{"queue": {...}}`.
#[derive(Serialize)]
struct SqsChannel<'a, Q> {
    queue: &'a Q,
}

/// The Queue object of a subscription: what it reads and how it polls.
#[derive(Serialize)]
struct ReadQueue<'a> {
    name: &'a str,
    #[serde(rename = "fifoQueue")]
    fifo_queue: bool,
    #[serde(rename = "visibilityTimeout", skip_serializing_if = "Option::is_none")]
    visibility_timeout: Option<u64>,
    #[serde(rename = "receiveMessageWaitTime")]
    receive_message_wait_time: u64,
}

/// The Queue object of a publish position: the queue's name and kind, which is all a position
/// knows of it.
#[derive(Serialize)]
struct WrittenQueue<'a> {
    name: &'a str,
    #[serde(rename = "fifoQueue")]
    fifo_queue: bool,
}

/// One binding, or none when it cannot be written: the document goes without it rather than
/// the service failing over its own description.
fn single(protocol: &'static str, version: &'static str, body: &impl Serialize) -> Bindings {
    Binding::new(protocol, version, body)
        .map(|binding| Bindings::new().with(binding))
        .unwrap_or_default()
}

/// The channel binding of a subscription to `queue`.
pub(crate) fn queue_channel_bindings(queue: &SqsQueue) -> Bindings {
    let name = queue.queue.as_str();
    let read = ReadQueue {
        name,
        fifo_queue: is_fifo(name),
        visibility_timeout: queue
            .visibility_secs()
            .map(|visibility| visibility.as_secs()),
        receive_message_wait_time: queue.wait.as_secs(),
    };
    single("sqs", SQS_BINDING_VERSION, &SqsChannel { queue: &read })
}

/// The channel binding of a position publishing to the queue `channel`.
pub(crate) fn publish_channel_bindings(channel: &str) -> Bindings {
    let written = WrittenQueue {
        name: channel,
        fifo_queue: is_fifo(channel),
    };
    single("sqs", SQS_BINDING_VERSION, &SqsChannel { queue: &written })
}

/// The `sns` channel binding: the topic, and the ordering of a FIFO topic.
#[cfg(feature = "sns")]
#[derive(Serialize)]
struct TopicChannel<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ordering: Option<Ordering>,
}

/// The Ordering object of a FIFO topic. Every publish carries a deduplication id of its own, so
/// the topic's content-based deduplication is not what a position relies on.
#[cfg(feature = "sns")]
#[derive(Serialize)]
struct Ordering {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(rename = "contentBasedDeduplication")]
    content_based_deduplication: bool,
}

/// The channel binding of a position publishing to the topic `channel`.
#[cfg(feature = "sns")]
pub(crate) fn topic_channel_bindings(channel: &str) -> Bindings {
    let topic = TopicChannel {
        name: channel,
        ordering: is_fifo(channel).then_some(Ordering {
            kind: "FIFO",
            content_based_deduplication: false,
        }),
    };
    single("sns", SNS_BINDING_VERSION, &topic)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_subscription_describes_its_queue_and_polling() {
        let queue = SqsQueue::new("orders.fifo")
            .wait(Duration::from_secs(5))
            .visibility(Duration::from_millis(1_500));
        let json = serde_json::to_value(queue_channel_bindings(&queue)).expect("JSON");
        let text = json.to_string();
        for part in [
            "\"name\":\"orders.fifo\"",
            "\"fifoQueue\":true",
            "\"visibilityTimeout\":2",
            "\"receiveMessageWaitTime\":5",
        ] {
            assert!(text.contains(part), "{part} in {text}");
        }
        let plain = serde_json::to_value(queue_channel_bindings(&SqsQueue::new("orders")))
            .expect("JSON")
            .to_string();
        assert!(!plain.contains("visibilityTimeout"), "{plain}");
    }
}
