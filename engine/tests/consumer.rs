//! The pull API: a consumer hands out deliveries and each settlement answers on its own, on
//! LocalStack.

use sqs_engine_test_support as support;

use std::time::Duration;

use sqs_engine::{Consumer, Delivery, Outcome, SettleError, SystemAttributes};
use support::*;

/// The consumer's next delivery, `what` in the failure when none comes within 10 s.
async fn next(consumer: &mut Consumer, what: &str) -> Delivery {
    tokio::time::timeout(Duration::from_secs(10), consumer.recv())
        .await
        .unwrap_or_else(|_| panic!("{what} within 10 s"))
        .expect("still receiving")
}

/// A queue named after `prefix` holding `count` messages `m0`, `m1`, ... (visibility timeout
/// `visibility_secs`), and a consumer of it with one receiver: its name, URL and consumer.
async fn queue_and_consumer(
    client: &aws_sdk_sqs::Client,
    prefix: &str,
    count: usize,
    visibility_secs: u32,
) -> (String, String, Consumer) {
    let name = unique(prefix);
    let url = create_queue(client, &name, visibility_secs).await;
    let bodies: Vec<String> = (0..count).map(|i| format!("m{i}")).collect();
    send(client, &url, &bodies).await;
    let consumer = builder(&name)
        .await
        .receivers(1)
        .build()
        .expect("valid settings")
        .consumer()
        .await
        .expect("opens");
    (name, url, consumer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_settlement_answers_once_sqs_applied_it() {
    let client = client().await;
    let (_, url, mut consumer) = queue_and_consumer(&client, "consumer", 3, 30).await;
    let control = consumer.handle();
    let mut deliveries = Vec::new();
    while deliveries.len() < 3 {
        let delivery = next(&mut consumer, "a delivery").await;
        deliveries.push(delivery);
    }
    let settlements: Vec<_> = deliveries
        .into_iter()
        .zip([Outcome::Ack, Outcome::Drop, Outcome::Retry])
        .map(|(delivery, outcome)| delivery.settle(outcome))
        .collect();
    for settlement in settlements {
        settlement.await.expect("applied");
    }
    // Only the retried message is left, visible again at once.
    let (visible, in_flight) = counts(&client, &url).await;
    assert_eq!(visible + in_flight, 1);
    let stats = control.stats();
    assert_eq!(
        (stats.acked.ok, stats.dropped.ok, stats.retried.ok),
        (1, 1, 1)
    );

    let last = next(&mut consumer, "the retried message").await;
    assert_eq!(last.message().receive_count(), 2);
    drop(consumer);
    control.shutdown().await;
    let late = last.settle(Outcome::Ack).await;
    assert!(
        matches!(late, Err(SettleError::Stopped { .. })),
        "after shutdown a settlement fails: {late:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_consumer_returns_what_it_had_not_handed_out() {
    let client = client().await;
    let (_, url, mut consumer) = queue_and_consumer(&client, "consumer-drop", 10, 60).await;
    let control = consumer.handle();
    let first = next(&mut consumer, "a delivery").await;
    eventually(
        Duration::from_secs(10),
        "the whole receive buffered",
        || control.stats().messages_received == 10,
    )
    .await;
    drop(consumer);
    first.settle(Outcome::Ack).await.expect("applied");
    control.shutdown().await;
    let stats = control.stats();
    // A poll still under way when the consumer was dropped may receive some of them again and
    // return them once more: at least the nine went back.
    assert!(
        stats.retried.ok >= 9,
        "the nine not handed out went back: {stats:?}"
    );
    assert_eq!(counts(&client, &url).await, (9, 0), "visible again at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_carries_the_system_attributes_the_receives_ask_for() {
    let client = client().await;
    let name = unique("consumer-attributes");
    let url = create_queue(&client, &name, 30).await;
    send(&client, &url, &["a".to_owned(), "b".to_owned()]).await;

    for (attributes, sender_id) in [
        (SystemAttributes::Used, false),
        (SystemAttributes::All, true),
    ] {
        let mut consumer = builder(&name)
            .await
            .receivers(1)
            .receive_batch(1)
            .system_attributes(attributes)
            .build()
            .expect("valid settings")
            .consumer()
            .await
            .expect("opens");
        let control = consumer.handle();
        let delivery = next(&mut consumer, "a delivery").await;
        let message = delivery.message();
        // What the engine reads comes either way.
        assert!(
            message.attribute("ApproximateReceiveCount").is_some(),
            "{attributes:?}"
        );
        assert!(message.sent_at().is_some(), "{attributes:?}");
        assert_eq!(
            message.attribute("SenderId").is_some(),
            sender_id,
            "{attributes:?}: {:?}",
            message.attributes()
        );
        delivery.settle(Outcome::Ack).await.expect("applied");
        drop(consumer);
        control.shutdown().await;
    }
}
