//! SNS notifications delivered without raw message delivery, unwrapped by
//! `Message::sns_notification`, against LocalStack's SNS and SQS (a real implementation of
//! both: the envelope is the one SNS writes, not one this repository wrote).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sns::types::MessageAttributeValue;
use sqs_engine::{AttributeValue, Message, Outcome, SnsEnvelopeError, SnsNotification};
use sqs_engine_test_support as support;

/// What the handler saw of each message, by body.
type Seen = Arc<Mutex<HashMap<String, Result<SnsNotification, SnsEnvelopeError>>>>;

#[tokio::test]
async fn a_topic_notification_unwraps_to_the_published_message_and_its_attributes() {
    let config = support::sdk_config().await;
    let sqs = support::client().await;
    let sns = aws_sdk_sns::Client::new(&config);
    let queue = support::unique("envelope");
    let url = support::create_queue(&sqs, &queue, 30).await;
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("queue attributes")
        .attributes
        .and_then(|attributes| {
            attributes
                .get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                .cloned()
        })
        .expect("the queue's ARN");
    let topic = sns
        .create_topic()
        .name(support::unique("envelope-topic"))
        .send()
        .await
        .expect("topic")
        .topic_arn
        .expect("the topic's ARN");
    // No RawMessageDelivery: SNS wraps each publish in its JSON envelope.
    sns.subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(&arn)
        .send()
        .await
        .expect("subscribed");

    let published = sns
        .publish()
        .topic_arn(&topic)
        .subject("new order")
        .message(r#"{"order":7}"#)
        .message_attributes(
            "tenant",
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value("acme")
                .build()
                .expect("attribute"),
        )
        .message_attributes(
            "weight",
            MessageAttributeValue::builder()
                .data_type("Number")
                .string_value("2.5")
                .build()
                .expect("attribute"),
        )
        .message_attributes(
            "digest",
            MessageAttributeValue::builder()
                .data_type("Binary")
                .binary_value(aws_sdk_sns::primitives::Blob::new(vec![0u8, 1, 0xff]))
                .build()
                .expect("attribute"),
        )
        .send()
        .await
        .expect("published")
        .message_id
        .expect("the publish's id");
    // A message sent to the queue directly is not a notification.
    sqs.send_message()
        .queue_url(&url)
        .message_body("sent directly")
        .send()
        .await
        .expect("sent");

    let seen: Seen = Arc::default();
    let handler = {
        let seen = seen.clone();
        move |message: Message| {
            let seen = seen.clone();
            async move {
                let unwrapped = message.sns_notification();
                seen.lock()
                    .expect("seen")
                    .insert(message.body().to_owned(), unwrapped);
                Outcome::Ack
            }
        }
    };
    let engine = support::builder(&queue).await.build().expect("engine");
    let running = support::spawn_engine(engine, handler);
    support::eventually(Duration::from_secs(30), "both messages handled", || {
        seen.lock().expect("seen").len() == 2
    })
    .await;
    running.shutdown().await;

    let seen = seen.lock().expect("seen").clone();
    assert_eq!(
        seen.get("sent directly").map(|result| result.is_err()),
        Some(true),
        "a direct message is not a notification: {seen:?}"
    );
    let notification = seen
        .iter()
        .find(|(body, _)| body.as_str() != "sent directly")
        .map(|(_, result)| result.clone().expect("the envelope unwraps"))
        .expect("the notification");
    assert_eq!(notification.message, r#"{"order":7}"#);
    assert_eq!(notification.subject.as_deref(), Some("new order"));
    assert_eq!(notification.topic_arn, topic);
    assert_eq!(notification.message_id, published);
    assert!(!notification.timestamp.is_empty());
    let attribute = |name: &str| {
        notification
            .message_attributes
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("attribute {name} in {notification:?}"))
    };
    assert_eq!(attribute("tenant").as_str(), Some("acme"));
    assert_eq!(attribute("weight").data_type, "Number");
    assert_eq!(attribute("weight").as_str(), Some("2.5"));
    assert_eq!(
        attribute("digest").value,
        AttributeValue::Binary(vec![0, 1, 0xff])
    );
    support::delete_queue(&sqs, &url).await;
}
