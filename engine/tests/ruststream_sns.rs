//! SNS fan-out through the RustStream broker: in process under the framework's `TestApp`, and
//! live on LocalStack (SNS and SQS): a topic publish reaches every subscribed queue with the
//! body and headers a direct publish gives, the queue's policy lets the topic deliver, and
//! publishes share `PublishBatch` calls.

mod subscription;

use sqs_engine_test_support as support;

use std::collections::HashMap;

use futures::future::join_all;
use ruststream::testing::TestApp;
use ruststream::{Broker, ConnectedBroker, Subscriber};
use serde::{Deserialize, Serialize};
use sqs_engine::prelude::*;
use subscription::{binary_body_and_headers, connect_live, end, message, next, queue, quiet};

// ---------------------------------------------------------------------------------------------
// In process
// ---------------------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Deserialize, Serialize, Outgoing)]
#[outgoing(name = "fan-orders")]
struct PlaceOrder {
    id: u64,
}

#[derive(Debug, PartialEq, Deserialize, Serialize, Outgoing)]
#[outgoing(name = "fan-order-events")]
struct OrderPlaced {
    id: u64,
}

#[subscriber(SqsQueue::new("fan-orders"), reply)]
async fn accept(order: &PlaceOrder) -> OrderPlaced {
    OrderPlaced { id: order.id }
}

#[subscriber(SqsQueue::new("fan-billing"))]
async fn bill(_placed: &OrderPlaced) -> HandlerOutcome {
    HandlerOutcome::ack()
}

#[subscriber(SqsQueue::new("fan-shipping"))]
async fn ship(_placed: &OrderPlaced) -> HandlerOutcome {
    HandlerOutcome::ack()
}

#[subscriber(SqsQueue::new("fan-audit"))]
async fn audit(_placed: &OrderPlaced) -> HandlerOutcome {
    HandlerOutcome::ack()
}

/// Subscribes billing and shipping to the topic; audit is subscribed by no one.
async fn wire(broker: SqsBroker) -> std::io::Result<()> {
    let connected = broker.connect().await.map_err(std::io::Error::other)?;
    for queue in ["fan-billing", "fan-shipping"] {
        connected
            .subscribe_queue_to_topic("fan-order-events", queue)
            .await
            .map_err(std::io::Error::other)?;
    }
    Ok(())
}

/// The service, wired from a startup hook on a clone of the app's broker.
fn wired(broker: SqsBroker) -> RustStream {
    let topology = broker.clone();
    RustStream::new(AppInfo::new("fan-out", "0.1.0"))
        .after_startup(async move |_state| wire(topology).await)
        .with_broker(broker, |b| {
            b.include(accept).out_reply(SnsPublish::default());
            b.include(bill);
            b.include(ship);
            b.include(audit);
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_a_topic_publish_reaches_the_subscribed_queues_only() {
    let tb = TestApp::start(wired(SqsBroker::new().region("us-east-1")))
        .await
        .expect("starts");
    tb.broker::<SqsBroker>()
        .message(&PlaceOrder { id: 7 })
        .publish()
        .await
        .expect("published");
    for queue in ["fan-billing", "fan-shipping"] {
        tb.broker::<SqsBroker>()
            .subscriber(queue)
            .assert_called_once()
            .with(&OrderPlaced { id: 7 })
            .settled(HandlerOutcome::ack());
    }
    tb.broker::<SqsBroker>()
        .subscriber("fan-audit")
        .assert_not_called();
    tb.broker::<SqsBroker>()
        .published::<OrderPlaced>("fan-order-events")
        .assert_called_once()
        .with(&OrderPlaced { id: 7 });
    tb.shutdown().await.expect("shuts down");
}

/// The policy names a queue an operator subscribed: the harness sees the copy it receives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_a_queue_named_by_fans_out_to_receives_the_publish() {
    let app = RustStream::new(AppInfo::new("fan-out", "0.1.0")).with_broker(
        SqsBroker::new().region("us-east-1"),
        |b| {
            b.include(accept)
                .out_reply(SnsPublish::default().fans_out_to(["fan-audit"]));
            b.include(audit);
            b.include(bill);
        },
    );
    let tb = TestApp::start(app).await.expect("starts");
    tb.broker::<SqsBroker>()
        .message(&PlaceOrder { id: 9 })
        .publish()
        .await
        .expect("published");
    tb.broker::<SqsBroker>()
        .subscriber("fan-audit")
        .assert_called_once()
        .with(&OrderPlaced { id: 9 })
        .settled(HandlerOutcome::ack());
    tb.broker::<SqsBroker>()
        .subscriber("fan-billing")
        .assert_not_called();
    tb.shutdown().await.expect("shuts down");
}

// ---------------------------------------------------------------------------------------------
// Live, on LocalStack
// ---------------------------------------------------------------------------------------------

/// The SNS tests that count LocalStack's calls run one at a time: its log counts every
/// client's.
static COUNTED: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn sns_client() -> aws_sdk_sns::Client {
    aws_sdk_sns::Client::new(&support::sdk_config().await)
}

/// A subscription to `queue`, the queue named `target`, which is subscribed to `topic`.
async fn fed_by(
    connected: &ConnectedSqsBroker,
    topic: &str,
    target: &str,
    queue: SqsQueue,
) -> sqs_engine::ruststream::SqsSubscriber {
    let subscriber = connected.subscribe_queue(queue).await.expect("subscribe");
    connected
        .subscribe_queue_to_topic(topic, target)
        .await
        .expect("subscribed");
    subscriber
}

/// The body and headers a delivery carries, the receive count left out.
fn shape(delivery: &SqsMessage) -> (Vec<u8>, HashMap<String, Vec<u8>>) {
    let headers = delivery
        .headers()
        .iter()
        .filter(|(name, _)| *name != RECEIVE_COUNT_HEADER)
        .map(|(name, value)| (name.to_owned(), value.to_vec()))
        .collect();
    (delivery.payload().to_vec(), headers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_a_topic_publish_reaches_each_subscribed_queue_as_a_direct_publish_would() {
    let connected = connect_live().await;
    let topic = support::unique("rs-topic");
    let (billing, shipping, direct) = (
        support::unique("rs-billing"),
        support::unique("rs-shipping"),
        support::unique("rs-direct"),
    );
    let mut subscribers = Vec::new();
    for name in [&billing, &shipping, &direct] {
        subscribers.push(
            connected
                .subscribe_queue(queue(name))
                .await
                .expect("subscribe"),
        );
    }
    for name in [&billing, &shipping] {
        connected
            .subscribe_queue_to_topic(&topic, name)
            .await
            .expect("subscribed to the topic");
    }
    // Safe on every start: a second call changes nothing.
    connected
        .subscribe_queue_to_topic(&topic, &billing)
        .await
        .expect("subscribed again");

    let (body, headers) = binary_body_and_headers();
    connected
        .sns_publisher()
        .publish(message(&topic, &body, headers.clone()), None)
        .await
        .expect("published to the topic");
    connected
        .publisher()
        .publish(message(&direct, &body, headers), None)
        .await
        .expect("published to the queue");

    let mut shapes = Vec::new();
    for subscriber in &mut subscribers {
        let mut stream = Box::pin(subscriber.stream());
        let delivery = next(&mut stream, "a delivery").await;
        shapes.push(shape(&delivery));
        delivery.ack().await.expect("ack");
    }
    assert_eq!(shapes[0].0, body, "the body arrives unwrapped");
    assert_eq!(
        shapes[0].1.get("tenant").map(Vec::as_slice),
        Some(&b"acme"[..])
    );
    assert_eq!(
        shapes[0], shapes[2],
        "billing reads what a direct publish gives"
    );
    assert_eq!(
        shapes[1], shapes[2],
        "shipping reads what a direct publish gives"
    );

    // One subscription per queue, with raw delivery.
    let sns = sns_client().await;
    let arn = sns
        .create_topic()
        .name(&topic)
        .send()
        .await
        .expect("the topic is there")
        .topic_arn
        .expect("an ARN");
    let subscriptions = sns
        .list_subscriptions_by_topic()
        .topic_arn(&arn)
        .send()
        .await
        .expect("listed");
    let subscriptions = subscriptions.subscriptions();
    assert_eq!(subscriptions.len(), 2, "{subscriptions:?}");
    for subscription in subscriptions {
        let attributes = sns
            .get_subscription_attributes()
            .subscription_arn(subscription.subscription_arn().expect("an ARN"))
            .send()
            .await
            .expect("attributes");
        assert_eq!(
            attributes
                .attributes()
                .and_then(|a| a.get("RawMessageDelivery"))
                .map(String::as_str),
            Some("true")
        );
    }

    // The billing queue's policy lets this topic, and only this topic, deliver.
    let client = support::client().await;
    let url = support::queue_url(&client, &billing).await;
    let policy = client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::Policy)
        .send()
        .await
        .expect("attributes")
        .attributes
        .and_then(|mut a| a.remove(&aws_sdk_sqs::types::QueueAttributeName::Policy))
        .expect("a policy");
    let policy: serde_json::Value = serde_json::from_str(&policy).expect("JSON");
    let statements = policy["Statement"].as_array().expect("statements");
    assert_eq!(statements.len(), 1, "granted once: {policy}");
    assert_eq!(
        statements[0]["Condition"]["ArnEquals"]["aws:SourceArn"],
        serde_json::Value::String(arn)
    );
    drop(subscribers);
    connected.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_publishes_to_a_topic_share_publish_batch_calls_and_each_gets_its_answer() {
    let _alone = COUNTED.lock().await;
    let connected = connect_live().await;
    let topic = support::unique("rs-batched");
    let target = support::unique("rs-batched-q");
    let mut subscriber = fed_by(
        &connected,
        &topic,
        &target,
        queue(&target).max_in_flight(40),
    )
    .await;
    let publisher = connected.sns_publisher();
    // The topic is resolved before the count starts.
    publisher
        .publish(message(&topic, b"warm", HeaderMap::new()), None)
        .await
        .expect("published");

    let before = support::read_log();
    let bodies: Vec<String> = (0..25).map(|i| format!("message {i}")).collect();
    let answers =
        join_all(bodies.iter().map(|body| {
            publisher.publish(message(&topic, body.as_bytes(), HeaderMap::new()), None)
        }))
        .await;
    let after = support::read_log();
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    let new_lines = &after[before.len().min(after.len())..];
    let batches = new_lines
        .lines()
        .filter(|line| line.contains("AWS sns.PublishBatch =>"))
        .count();
    let singles = new_lines
        .lines()
        .filter(|line| line.contains("AWS sns.Publish =>"))
        .count();
    assert_eq!(singles, 0, "no single Publish");
    assert!(
        (3..=5).contains(&batches),
        "25 publishes in batches of at most ten: {batches} PublishBatch calls"
    );

    let mut received = Vec::new();
    let mut stream = Box::pin(subscriber.stream());
    while received.len() < 26 {
        let delivery = next(&mut stream, "a delivery").await;
        received.push(String::from_utf8(delivery.payload().to_vec()).expect("text"));
        delivery.ack().await.expect("ack");
    }
    for body in &bodies {
        assert!(received.contains(body), "{body} delivered");
    }
    end!(stream, subscriber, connected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_a_fifo_topic_keeps_groups_and_deduplication_ids_on_a_fifo_queue() {
    let connected = connect_live().await;
    let topic = format!("{}.fifo", support::unique("rs-ordered"));
    let target = format!("{}.fifo", support::unique("rs-ordered-q"));
    let mut subscriber = fed_by(&connected, &topic, &target, queue(&target)).await;
    let publisher = connected.sns_publisher();
    let messages: Vec<(String, SqsPublishOptions)> = (0..6)
        .map(|i| {
            let group = if i % 2 == 0 { "even" } else { "odd" };
            (
                format!("{group} {i}"),
                SqsPublishOptions::default().group_id(group),
            )
        })
        .collect();
    let answers = join_all(messages.iter().map(|(body, options)| {
        publisher.publish(
            message(&topic, body.as_bytes(), HeaderMap::new()),
            Some(options),
        )
    }))
    .await;
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    // The same deduplication id twice: SNS takes the second send and drops it.
    let once = SqsPublishOptions::default()
        .group_id("even")
        .deduplication_id("only-once");
    for _ in 0..2 {
        publisher
            .publish(message(&topic, b"even once", HeaderMap::new()), Some(&once))
            .await
            .expect("published");
    }
    // A standard topic refuses a group before anything is sent.
    let standard = support::unique("rs-standard");
    let refused = publisher
        .publish(
            message(&standard, b"x", HeaderMap::new()),
            Some(&SqsPublishOptions::default().group_id("g")),
        )
        .await;
    assert!(
        matches!(refused, Err(SqsError::NotFifo { .. })),
        "{refused:?}"
    );

    let mut by_group: HashMap<String, Vec<String>> = HashMap::new();
    let mut stream = Box::pin(subscriber.stream());
    for _ in 0..7 {
        let delivery = next(&mut stream, "a delivery").await;
        let group = delivery
            .headers()
            .get_str(PARTITION_KEY_HEADER)
            .expect("a FIFO delivery carries its group")
            .to_owned();
        by_group
            .entry(group)
            .or_default()
            .push(String::from_utf8(delivery.payload().to_vec()).expect("text"));
        delivery.ack().await.expect("ack");
    }
    assert_eq!(
        by_group["even"],
        ["even 0", "even 2", "even 4", "even once"]
    );
    assert_eq!(by_group["odd"], ["odd 1", "odd 3", "odd 5"]);
    quiet(&mut stream, "the duplicate was dropped").await;
    end!(stream, subscriber, connected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_subscribing_a_missing_queue_fails_naming_the_policy() {
    let connected = connect_live().await;
    let err = connected
        .subscribe_queue_to_topic(&support::unique("rs-topic"), &support::unique("rs-missing"))
        .await
        .expect_err("no such queue");
    assert!(matches!(err, SqsError::QueuePolicy { .. }), "{err:?}");
    connected.shutdown().await.expect("shutdown");
}

/// A clone of a connected broker connects through the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_connects_through_the_open_connection() {
    let broker = SqsBroker::new()
        .endpoint(support::endpoint())
        .region("us-east-1")
        .test_credentials();
    let clone = broker.clone();
    let first = broker.connect().await.expect("connect");
    let second = clone.clone().connect().await.expect("connect");
    second.clone().shutdown().await.expect("shutdown");
    let err = first
        .subscribe_queue(queue(&support::unique("rs-after")))
        .await
        .expect_err("the shared connection is shut");
    assert!(matches!(err, SqsError::NotConnected), "{err:?}");
    // Once it is shut, a clone connects anew.
    let third = clone.connect().await.expect("connect");
    third.shutdown().await.expect("shutdown");
}
