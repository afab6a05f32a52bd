//! The embedded server's SNS driven by a real `aws_sdk_sns::Client` (the AWS Query protocol)
//! beside a real `aws_sdk_sqs::Client`, over loopback HTTP: topics, subscriptions, and
//! publishes fanned out into the server's queues.

use std::net::SocketAddr;

use aws_sdk_sns::error::ProvideErrorMetadata as _;
use aws_sdk_sns::primitives::Blob;
use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};
use aws_sdk_sqs::types::QueueAttributeName;

use super::tests::assert_service_error;
use super::{EmbeddedSqs, SNS_ACTIONS};

/// A server on a free loopback port, and an SQS and an SNS client configured for it.
async fn start() -> (EmbeddedSqs, aws_sdk_sqs::Client, aws_sdk_sns::Client) {
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("a valid address");
    let server = EmbeddedSqs::start(addr).expect("the server starts");
    let config = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(server.endpoint())
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(
                aws_credential_types::Credentials::new("test", "test", None, None, "test"),
            ),
        )
        .build();
    let sqs = aws_sdk_sqs::Client::new(&config);
    let sns = aws_sdk_sns::Client::new(&config);
    (server, sqs, sns)
}

/// Creates queue `name`; answers its URL and ARN.
async fn queue(sqs: &aws_sdk_sqs::Client, name: &str) -> (String, String) {
    let url = sqs
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .expect("CreateQueue succeeds")
        .queue_url
        .expect("a URL");
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("GetQueueAttributes succeeds")
        .attributes
        .and_then(|mut attributes| attributes.remove(&QueueAttributeName::QueueArn))
        .expect("an ARN");
    (url, arn)
}

/// Creates topic `name`; answers its ARN.
async fn topic(sns: &aws_sdk_sns::Client, name: &str) -> String {
    sns.create_topic()
        .name(name)
        .send()
        .await
        .expect("CreateTopic succeeds")
        .topic_arn
        .expect("an ARN")
}

/// Subscribes the queue of `queue_arn` to the topic, raw or not; answers the subscription's
/// ARN.
async fn subscribe(
    sns: &aws_sdk_sns::Client,
    topic_arn: &str,
    queue_arn: &str,
    raw: bool,
) -> String {
    sns.subscribe()
        .topic_arn(topic_arn)
        .protocol("sqs")
        .endpoint(queue_arn)
        .attributes("RawMessageDelivery", raw.to_string())
        .return_subscription_arn(true)
        .send()
        .await
        .expect("Subscribe succeeds")
        .subscription_arn
        .expect("a subscription ARN")
}

/// Every message on the queue, received at once (visibility 30 s), with their attributes.
async fn drain(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<aws_sdk_sqs::types::Message> {
    let mut all = Vec::new();
    loop {
        let messages = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .send()
            .await
            .expect("ReceiveMessage succeeds")
            .messages
            .unwrap_or_default();
        if messages.is_empty() {
            return all;
        }
        all.extend(messages);
    }
}

/// A string message attribute.
fn text(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .expect("a valid attribute")
}

#[tokio::test]
async fn a_publish_fans_out_to_every_subscribed_queue_with_its_body_and_attributes() {
    let (server, sqs, sns) = start().await;
    let (ledger, ledger_arn) = queue(&sqs, "ledger").await;
    let (notices, notices_arn) = queue(&sqs, "notices").await;
    let (elsewhere, elsewhere_arn) = queue(&sqs, "elsewhere").await;
    let booked = topic(&sns, "booked").await;
    assert_eq!(booked, "arn:aws:sns:us-east-1:000000000000:booked");
    // CreateTopic is idempotent: the same name answers the same topic.
    assert_eq!(topic(&sns, "booked").await, booked);
    let other = topic(&sns, "other").await;
    let first = subscribe(&sns, &booked, &ledger_arn, true).await;
    subscribe(&sns, &booked, &notices_arn, true).await;
    subscribe(&sns, &other, &elsewhere_arn, true).await;
    // Subscribe is idempotent for the same queue and attributes, refused with others.
    assert_eq!(subscribe(&sns, &booked, &ledger_arn, true).await, first);
    let error = sns
        .subscribe()
        .topic_arn(&booked)
        .protocol("sqs")
        .endpoint(&ledger_arn)
        .attributes("RawMessageDelivery", "false")
        .send()
        .await
        .expect_err("other attributes are refused");
    assert_eq!(error.code(), Some("InvalidParameter"));

    let published = sns
        .publish()
        .topic_arn(&booked)
        .message(r#"{"payment":7}"#)
        .message_attributes("kind", text("booked"))
        .message_attributes(
            "raw",
            MessageAttributeValue::builder()
                .data_type("Binary")
                .binary_value(Blob::new(vec![0, 1, 255]))
                .build()
                .expect("a valid attribute"),
        )
        .send()
        .await
        .expect("Publish succeeds");
    assert!(published.message_id.is_some());

    for url in [&ledger, &notices] {
        let messages = drain(&sqs, url).await;
        assert_eq!(messages.len(), 1, "one copy on {url}");
        let message = &messages[0];
        assert_eq!(message.body(), Some(r#"{"payment":7}"#));
        let attributes = message.message_attributes().expect("attributes");
        assert_eq!(attributes["kind"].string_value(), Some("booked"));
        assert_eq!(
            attributes["raw"].binary_value().map(Blob::as_ref),
            Some(&[0_u8, 1, 255][..])
        );
    }
    assert!(
        drain(&sqs, &elsewhere).await.is_empty(),
        "a queue subscribed to another topic gets nothing"
    );

    let error = sns
        .publish()
        .topic_arn("arn:aws:sns:us-east-1:000000000000:missing")
        .message("x")
        .send()
        .await
        .expect_err("a missing topic is refused");
    assert_service_error(&error, |e| e.is_not_found_exception());
    let counts = server.call_counts();
    let count = |name: &str| {
        counts
            .iter()
            .find(|(action, _)| *action == name)
            .map_or(0, |(_, count)| *count)
    };
    assert_eq!(count("CreateTopic"), 3);
    assert_eq!(count("Subscribe"), 5);
    assert_eq!(count("Publish"), 2);
    assert!(SNS_ACTIONS.contains(&"Publish") && !SNS_ACTIONS.contains(&"SendMessage"));
}

#[tokio::test]
async fn publish_batch_answers_each_entry_and_takes_at_most_ten() {
    let (_server, sqs, sns) = start().await;
    let (ledger, ledger_arn) = queue(&sqs, "ledger").await;
    let booked = topic(&sns, "booked").await;
    subscribe(&sns, &booked, &ledger_arn, true).await;

    let entry = |id: &str, message: &str| {
        PublishBatchRequestEntry::builder()
            .id(id)
            .message(message)
            .message_attributes("n", text(id))
            .build()
            .expect("a valid entry")
    };
    let answer = sns
        .publish_batch()
        .topic_arn(&booked)
        .publish_batch_request_entries(entry("a", "first"))
        .publish_batch_request_entries(entry("b", ""))
        .publish_batch_request_entries(entry("c", "third"))
        .send()
        .await
        .expect("PublishBatch succeeds");
    let successful: Vec<&str> = answer
        .successful()
        .iter()
        .filter_map(|entry| entry.id())
        .collect();
    assert_eq!(successful, ["a", "c"]);
    assert!(
        answer
            .successful()
            .iter()
            .all(|entry| entry.message_id().is_some())
    );
    let failed = answer.failed();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].id(), "b");
    assert_eq!(failed[0].code(), "InvalidParameter");
    assert!(failed[0].sender_fault());
    let mut bodies: Vec<String> = drain(&sqs, &ledger)
        .await
        .iter()
        .filter_map(|message| message.body().map(str::to_owned))
        .collect();
    bodies.sort();
    assert_eq!(
        bodies,
        ["first", "third"],
        "the failed entry is not delivered"
    );

    let ten = (0..10).map(|n| entry(&n.to_string(), "m"));
    sns.publish_batch()
        .topic_arn(&booked)
        .set_publish_batch_request_entries(Some(ten.collect()))
        .send()
        .await
        .expect("ten entries are taken");
    let eleven = (0..11).map(|n| entry(&n.to_string(), "m"));
    let error = sns
        .publish_batch()
        .topic_arn(&booked)
        .set_publish_batch_request_entries(Some(eleven.collect()))
        .send()
        .await
        .expect_err("eleven entries are refused");
    assert_service_error(&error, |e| {
        e.is_too_many_entries_in_batch_request_exception()
    });
    let error = sns
        .publish_batch()
        .topic_arn(&booked)
        .publish_batch_request_entries(entry("x", "m"))
        .publish_batch_request_entries(entry("x", "n"))
        .send()
        .await
        .expect_err("ids alike are refused");
    assert_service_error(&error, |e| e.is_batch_entry_ids_not_distinct_exception());
    assert_eq!(
        drain(&sqs, &ledger).await.len(),
        10,
        "only the batch of ten was delivered"
    );
}

#[tokio::test]
async fn without_raw_delivery_the_queue_gets_the_json_envelope() {
    let (_server, sqs, sns) = start().await;
    let (audit, audit_arn) = queue(&sqs, "audit").await;
    let booked = topic(&sns, "booked").await;
    let subscription = subscribe(&sns, &booked, &audit_arn, false).await;
    let published = sns
        .publish()
        .topic_arn(&booked)
        .subject("payments")
        .message("payment 7 booked")
        .message_attributes("kind", text("booked"))
        .send()
        .await
        .expect("Publish succeeds");

    let messages = drain(&sqs, &audit).await;
    assert_eq!(messages.len(), 1);
    assert!(
        messages[0]
            .message_attributes()
            .is_none_or(|a| a.is_empty()),
        "the attributes travel in the envelope, not on the queue message"
    );
    let envelope: serde_json::Value =
        serde_json::from_str(messages[0].body().expect("a body")).expect("JSON");
    assert_eq!(envelope["Type"], "Notification");
    assert_eq!(envelope["TopicArn"], booked.as_str());
    assert_eq!(envelope["Message"], "payment 7 booked");
    assert_eq!(envelope["Subject"], "payments");
    assert_eq!(
        envelope["MessageId"],
        published.message_id().expect("an id")
    );
    assert_eq!(envelope["MessageAttributes"]["kind"]["Type"], "String");
    assert_eq!(envelope["MessageAttributes"]["kind"]["Value"], "booked");

    // Turned on for the subscription, raw delivery applies to the next publish.
    sns.set_subscription_attributes()
        .subscription_arn(&subscription)
        .attribute_name("RawMessageDelivery")
        .attribute_value("true")
        .send()
        .await
        .expect("SetSubscriptionAttributes succeeds");
    sns.publish()
        .topic_arn(&booked)
        .message("payment 8 booked")
        .send()
        .await
        .expect("Publish succeeds");
    let messages = drain(&sqs, &audit).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].body(), Some("payment 8 booked"));
}
