//! The RustStream broker's own behaviour, live against LocalStack: what goes over the wire, and
//! in how many calls.

mod subscription;

use sqs_engine_test_support as support;

use std::collections::HashSet;
use std::num::NonZeroU32;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures::future::join_all;
use ruststream::{Broker, ConnectedBroker, Subscriber};
use sqs_engine::prelude::*;
use subscription::{binary_body_and_headers, connect_live, end, message, next, queue, quiet};
use support::Recording;

async fn connect(recording: &Recording) -> ConnectedSqsBroker {
    SqsBroker::new()
        .api(recording.clone())
        .connect()
        .await
        .expect("connect")
}

fn calls(recording: &Recording, action: &str) -> Vec<usize> {
    recording
        .batches()
        .iter()
        .filter(|call| call.action == action)
        .map(|call| call.receipt_handles.len())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_and_acks_of_many_messages_share_batch_calls() {
    let recording = Recording::new(None).await;
    let connected = connect(&recording).await;
    let name = support::unique("rs.batched");
    let mut subscriber = connected
        .subscribe_queue(queue(&name).max_in_flight(40))
        .await
        .expect("subscribe");
    let publisher = connected.publisher();

    let bodies: Vec<String> = (0..40).map(|i| format!("message {i}")).collect();
    let sent =
        join_all(bodies.iter().map(|body| {
            publisher.publish(message(&name, body.as_bytes(), HeaderMap::new()), None)
        }))
        .await;
    assert!(sent.iter().all(Result::is_ok), "{sent:?}");
    let sends = calls(&recording, "SendMessageBatch");
    assert_eq!(sends.iter().sum::<usize>(), 40);
    assert!(
        sends.len() < 40 && sends.iter().all(|&n| n <= 10),
        "40 publishes coalesced into batches of at most ten: {sends:?}"
    );

    let mut received = Vec::new();
    {
        let mut stream = Box::pin(subscriber.stream());
        while received.len() < 40 {
            let delivery = next(&mut stream, "a delivery").await;
            received.push(delivery);
        }
    }
    let got: HashSet<String> = received
        .iter()
        .map(|d| String::from_utf8(d.payload().to_vec()).expect("text"))
        .collect();
    assert_eq!(got, bodies.iter().cloned().collect());
    let acked = join_all(received.into_iter().map(IncomingMessage::ack)).await;
    assert!(acked.iter().all(Result::is_ok), "{acked:?}");
    // An ack resolves once queued: the shutdown sends what is queued and waits for SQS.
    drop(subscriber);
    connected.shutdown().await.expect("shutdown");
    let deletes = calls(&recording, "DeleteMessageBatch");
    assert_eq!(deletes.iter().sum::<usize>(), 40);
    assert!(
        deletes.len() < 40,
        "40 acks coalesced into batch calls: {deletes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_body_and_headers_arrive_as_sent_with_the_receive_count() {
    let recording = Recording::new(None).await;
    let connected = connect(&recording).await;
    let name = support::unique("rs.shape");
    let mut subscriber = connected
        .subscribe_queue(queue(&name))
        .await
        .expect("subscribe");
    let (body, headers) = binary_body_and_headers();
    connected
        .publisher()
        .publish(message(&name, &body, headers), None)
        .await
        .expect("publish");

    let mut stream = Box::pin(subscriber.stream());
    let delivery = next(&mut stream, "a delivery").await;
    assert_eq!(delivery.payload(), body);
    assert_eq!(delivery.headers().get_str("tenant"), Some("acme"));
    assert_eq!(
        delivery.headers().get("raw"),
        Some(&[0xffu8, 0x00, 0x7f][..])
    );
    assert_eq!(delivery.headers().get_str(RECEIVE_COUNT_HEADER), Some("1"));
    assert_eq!(delivery.redelivery_count(), Some(1));
    assert!(
        delivery
            .headers()
            .get("ruststream-payload-encoding")
            .is_none(),
        "the base64 marker is consumed"
    );

    // Retried, it comes back as the same message, its count one higher.
    delivery.nack(true).await.expect("retry");
    let again = next(&mut stream, "the retry").await;
    assert_eq!(again.payload(), body);
    assert_eq!(again.redelivery_count(), Some(2));
    assert_eq!(again.headers().get_str(RECEIVE_COUNT_HEADER), Some("2"));
    again.ack().await.expect("ack");
    end!(stream, subscriber, connected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sqs_cannot_carry_is_refused_and_nothing_is_sent() {
    let recording = Recording::new(None).await;
    let connected = connect(&recording).await;
    let name = support::unique("rs.refused");
    let publisher = connected.publisher();

    let mut eleven = HeaderMap::new();
    for i in 0..11 {
        eleven.insert(format!("h{i}"), "v");
    }
    let err = publisher
        .publish(message(&name, b"body", eleven), None)
        .await
        .expect_err("eleven headers");
    assert!(matches!(err, SqsError::Refused { .. }), "{err}");

    let mut empty = HeaderMap::new();
    empty.insert("empty", "");
    let err = publisher
        .publish(message(&name, b"body", empty), None)
        .await
        .expect_err("an empty header");
    assert!(err.to_string().contains("empty"), "{err}");

    // Ten headers and a binary body: the marker would be the eleventh attribute.
    let mut ten = HeaderMap::new();
    for i in 0..10 {
        ten.insert(format!("h{i}"), "v");
    }
    let err = publisher
        .publish(message(&name, &[0xff], ten), None)
        .await
        .expect_err("ten headers and the base64 marker");
    assert!(matches!(err, SqsError::Refused { .. }), "{err}");

    let err = publisher
        .publish(
            message(&name, b"body", HeaderMap::new()),
            Some(&SqsPublishOptions::default().group_id("g")),
        )
        .await
        .expect_err("a group on a standard queue");
    assert!(
        matches!(
            err,
            SqsError::NotFifo {
                setting: "group_id",
                ..
            }
        ),
        "{err}"
    );
    let err = publisher
        .publish(
            message(&name, b"body", HeaderMap::new()),
            Some(&SqsPublishOptions::default().deduplication_id("d")),
        )
        .await
        .expect_err("a deduplication id on a standard queue");
    assert!(
        matches!(
            err,
            SqsError::NotFifo {
                setting: "deduplication_id",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        calls(&recording, "SendMessageBatch").is_empty(),
        "nothing was sent"
    );
    connected.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_queue_takes_groups_and_drops_a_second_send_with_the_same_deduplication_id() {
    let recording = Recording::new(None).await;
    let connected = connect(&recording).await;
    let name = format!("{}.fifo", support::unique("rs.fifo"));
    let mut subscriber = connected
        .subscribe_queue(queue(&name))
        .await
        .expect("subscribe");
    let publisher = connected.publisher();
    let options = SqsPublishOptions::default()
        .group_id("account-7")
        .deduplication_id("payment-7");
    for _ in 0..2 {
        publisher
            .publish(
                message(&name, b"payment 7", HeaderMap::new()),
                Some(&options),
            )
            .await
            .expect("publish");
    }
    publisher
        .publish(
            message(&name, b"payment 8", HeaderMap::new()),
            Some(&SqsPublishOptions::default().group_id("account-7")),
        )
        .await
        .expect("publish");

    let mut stream = Box::pin(subscriber.stream());
    let mut bodies = Vec::new();
    for _ in 0..2 {
        let delivery = next(&mut stream, "a delivery").await;
        assert_eq!(delivery.partition_key(), Some(&b"account-7"[..]));
        assert_eq!(
            delivery.headers().get_str(PARTITION_KEY_HEADER),
            Some("account-7")
        );
        bodies.push(String::from_utf8(delivery.payload().to_vec()).expect("text"));
        delivery.ack().await.expect("ack");
    }
    assert_eq!(
        bodies,
        ["payment 7", "payment 8"],
        "in order, the duplicate dropped"
    );
    quiet(&mut stream, "no third delivery").await;
    end!(stream, subscriber, connected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_on_the_last_allowed_receive_moves_the_message_to_the_dead_letter_queue() {
    let recording = Recording::new(None).await;
    let connected = connect(&recording).await;
    let name = support::unique("rs.capped");
    let dead = support::unique("rs.capped-dead");
    let mut subscriber = connected
        .subscribe_queue(queue(&name).redrive(NonZeroU32::new(2).expect("non-zero"), &dead))
        .await
        .expect("subscribe");
    let mut dead_subscriber = connected
        .subscribe_queue(queue(&dead))
        .await
        .expect("subscribe to the dead-letter queue");
    connected
        .publisher()
        .publish(message(&name, b"invoice 9", HeaderMap::new()), None)
        .await
        .expect("publish");

    let mut stream = Box::pin(subscriber.stream());
    let first = next(&mut stream, "a delivery").await;
    assert_eq!(first.redelivery_count(), Some(1));
    first.nack(true).await.expect("retry");
    let second = next(&mut stream, "a delivery").await;
    assert_eq!(second.redelivery_count(), Some(2));
    // A drop at the cap returns the message rather than deleting it.
    second.nack(false).await.expect("drop");

    let mut dead_stream = Box::pin(dead_subscriber.stream());
    let moved = next(
        &mut dead_stream,
        "the message reaches the dead-letter queue",
    )
    .await;
    assert_eq!(moved.payload(), b"invoice 9");
    moved.ack().await.expect("ack");
    let visibility: Vec<usize> = calls(&recording, "ChangeMessageVisibilityBatch");
    assert!(
        !visibility.is_empty(),
        "the drop at the cap changed visibility"
    );
    drop((stream, dead_stream));
    drop((subscriber, dead_subscriber));
    connected.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_shutdown_publishes_and_subscriptions_are_refused() {
    let recording = Recording::new(None).await;
    let connected = connect(&recording).await;
    let name = support::unique("rs.closed");
    let subscriber = connected
        .subscribe_queue(queue(&name))
        .await
        .expect("subscribe");
    let publisher = connected.publisher();
    publisher
        .publish(message(&name, b"one", HeaderMap::new()), None)
        .await
        .expect("publish");
    drop(subscriber);
    connected.clone().shutdown().await.expect("shutdown");
    let err = publisher
        .publish(message(&name, b"two", HeaderMap::new()), None)
        .await
        .expect_err("publish after shutdown");
    assert!(matches!(err, SqsError::NotConnected), "{err}");
    let err = connected
        .subscribe_queue(queue(&name))
        .await
        .expect_err("subscribe after shutdown");
    assert!(matches!(err, SqsError::NotConnected), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_made_from_an_sdk_config_talks_to_its_endpoint() {
    let connected = SqsBroker::from_config(support::sdk_config().await)
        .connect()
        .await
        .expect("connect");
    let name = support::unique("rs.config");
    let mut subscriber = connected
        .subscribe_queue(queue(&name))
        .await
        .expect("subscribe");
    connected
        .publisher()
        .publish(message(&name, b"configured", HeaderMap::new()), None)
        .await
        .expect("publish");
    let mut stream = Box::pin(subscriber.stream());
    let delivery = next(&mut stream, "a delivery").await;
    assert_eq!(delivery.payload(), b"configured");
    delivery.ack().await.expect("ack");
    end!(stream, subscriber, connected);
}

/// Receive counts seen by [`hold_the_first`], and whether its first delivery saw the second
/// before returning.
static HELD: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// A body as SQS delivered it.
#[derive(Deserialized)]
struct Raw<'a>(#[allow(dead_code, reason = "read by the framework only")] &'a [u8]);

/// Holds the first receive of a message until the message is received again (or 15 s pass);
/// acks the later ones at once.
#[subscriber(SqsQueue)]
async fn hold_the_first(_body: &Raw<'_>, cx: &mut Context<'_>) -> HandlerOutcome {
    let receives: u32 = cx
        .headers()
        .get_str(RECEIVE_COUNT_HEADER)
        .and_then(|count| count.parse().ok())
        .unwrap_or(0);
    HELD.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(receives);
    if receives == 1 {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        while tokio::time::Instant::now() < deadline
            && !HELD
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&2)
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    HandlerOutcome::ack()
}

/// The mount-site steps of `SqsSubscription` reach the subscription: `.create_if_missing()`
/// opens a queue nobody created (the broker does not create queues), and with
/// `.visibility(2 s)` and `.heartbeat(false)` a message whose handler holds it is received a
/// second time while the first handler still runs. (With the queue's 30 s and the heartbeat
/// on, the first handler would give up after 15 s and ack, having never seen a second receive.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_site_steps_set_the_subscription() {
    let name = support::unique("rs.mount-steps");
    let broker = SqsBroker::new()
        .endpoint(support::endpoint())
        .region("us-east-1")
        .test_credentials();
    let queue = name.clone();
    let app = RustStream::new(AppInfo::new("mount-steps", "0.1.0")).with_broker(broker, move |b| {
        b.include(
            hold_the_first
                .name(queue)
                .workers(nonzero!(2))
                .create_if_missing()
                .wait(Duration::from_secs(1))
                .visibility(Duration::from_secs(2))
                .heartbeat(false),
        );
    });
    let running = app
        .start()
        .await
        .expect("the app starts on a queue it creates");
    let client = support::client().await;
    let url = support::queue_url(&client, &sqs_engine::ruststream::queue_name(&name)).await;
    support::send(&client, &url, &["held".to_owned()]).await;
    support::eventually(Duration::from_secs(20), "a second receive", || {
        HELD.lock().unwrap_or_else(PoisonError::into_inner).len() >= 2
    })
    .await;
    running.shutdown().await.expect("shutdown");
    let held = HELD.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(
        held[..2],
        [1, 2],
        "received again while the first handler held it: {held:?}"
    );
}

/// On a FIFO queue a subscription hands out at most one unsettled delivery per message group,
/// whatever the framework's workers mode asks for: the next of a group comes once the one
/// before is acked, and a nack sends the rest of the group back behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_subscription_hands_out_one_unsettled_delivery_per_group() {
    let recording = Recording::new(None).await;
    let connected = connect(&recording).await;
    let name = format!("{}.fifo", support::unique("rs.fifo-order"));
    let mut subscriber = connected
        .subscribe_queue(queue(&name))
        .await
        .expect("subscribe");
    let publisher = connected.publisher();
    for seq in 0..3 {
        for group in ["a", "b"] {
            publisher
                .publish(
                    message(&name, format!("{group}:{seq}").as_bytes(), HeaderMap::new()),
                    Some(&SqsPublishOptions::default().group_id(group)),
                )
                .await
                .expect("publish");
        }
    }
    let body =
        |delivery: &SqsMessage| String::from_utf8(delivery.payload().to_vec()).expect("text");

    let mut stream = Box::pin(subscriber.stream());
    let first = next(&mut stream, "a group's first").await;
    let second = next(&mut stream, "the other group's first").await;
    let mut heads = [body(&first), body(&second)];
    heads.sort();
    assert_eq!(heads, ["a:0", "b:0"]);
    quiet(
        &mut stream,
        "no second delivery of a group while its first is unsettled",
    )
    .await;
    let (a, b) = if body(&first) == "a:0" {
        (first, second)
    } else {
        (second, first)
    };
    a.ack().await.expect("ack a:0");
    let a1 = next(&mut stream, "a:1 after a:0").await;
    assert_eq!(body(&a1), "a:1");
    b.nack(true).await.expect("retry b:0");
    let b_again = next(&mut stream, "b:0 again, before the rest of b").await;
    assert_eq!(body(&b_again), "b:0");
    assert_eq!(b_again.redelivery_count(), Some(2));
    for delivery in [a1, b_again] {
        delivery.ack().await.expect("ack");
    }
    let mut rest = Vec::new();
    for _ in 0..3 {
        let delivery = next(&mut stream, "the rest, in order per group").await;
        rest.push(body(&delivery));
        delivery.ack().await.expect("ack");
    }
    let of = |group: &str| -> Vec<String> {
        rest.iter()
            .filter(|b| b.starts_with(group))
            .cloned()
            .collect()
    };
    assert_eq!(of("a"), ["a:2"]);
    assert_eq!(of("b"), ["b:1", "b:2"]);
    end!(stream, subscriber, connected);
}

// The order things are dropped or shut down in at the end of a service. These run against
// LocalStack, for correctness: what SQS holds once the broker's shutdown has returned. Every
// queue here has a 60 s visibility timeout, so a message visible again before a test ends went
// back by a call, never by a lapsed timeout.

/// The visibility timeout of the queues below: far longer than any of these tests.
const LONG_VISIBILITY: Duration = Duration::from_secs(60);

/// Waits until the queue at `url` holds `expected` (visible, in flight), within 20 s.
async fn until_counts(url: &str, expected: (u64, u64)) {
    let client = support::client().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let counts = support::counts(&client, url).await;
        if counts == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the queue holds {counts:?} (visible, in flight), not {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_running_while_the_broker_shuts_down_has_its_ack_applied() {
    let connected = connect_live().await;
    let name = support::unique("rs.shutdown-running");
    let mut subscriber = connected
        .subscribe_queue(queue(&name).visibility(LONG_VISIBILITY))
        .await
        .expect("subscribe");
    let url = subscriber.queue_url().to_owned();
    connected
        .publisher()
        .publish(message(&name, b"running", HeaderMap::new()), None)
        .await
        .expect("publish");
    let delivery = {
        let mut stream = Box::pin(subscriber.stream());
        next(&mut stream, "a delivery").await
    };
    // As the framework does when a subscription's loop ends: the subscriber goes first, and a
    // handler of it may still run.
    drop(subscriber);
    let handler = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        delivery.ack().await
    });
    tokio::time::timeout(Duration::from_secs(30), connected.shutdown())
        .await
        .expect("the shutdown ends once the handler is done")
        .expect("shutdown");
    let acked = handler.await.expect("the handler ran");
    assert!(acked.is_ok(), "the ack made during the shutdown: {acked:?}");
    let client = support::client().await;
    assert_eq!(
        support::counts(&client, &url).await,
        (0, 0),
        "deleted by the time the shutdown returned, not to be delivered again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_dropped_after_the_broker_shut_down_returns_what_it_had_not_handed_out() {
    let connected = connect_live().await;
    let name = support::unique("rs-shutdown-prefetched");
    // The ten are on the queue before the subscription starts, so its first receive brings
    // them all (sent while it polls, they could come in receives held back by the prefetch).
    let client = support::client().await;
    let url = support::create_queue(&client, &name, 60).await;
    let bodies: Vec<String> = (0..10).map(|i| format!("prefetched {i}")).collect();
    support::send(&client, &url, &bodies).await;
    let mut subscriber = connected
        .subscribe_queue(queue(&name).visibility(LONG_VISIBILITY).receivers(1))
        .await
        .expect("subscribe");
    {
        let mut stream = Box::pin(subscriber.stream());
        let first = next(&mut stream, "a delivery").await;
        first.ack().await.expect("ack");
    }
    // The other nine are received, and held by the subscriber without being handed out.
    until_counts(&url, (0, 9)).await;

    // The broker shuts down first; the subscriber goes after it.
    let shutting_down = tokio::spawn(connected.clone().shutdown());
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(subscriber);
    tokio::time::timeout(Duration::from_secs(30), shutting_down)
        .await
        .expect("the shutdown ends")
        .expect("the shutdown ran")
        .expect("shutdown");
    // Within 20 s of a 60 s visibility timeout: only a return makes them visible.
    until_counts(&url, (9, 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_requeued_after_the_broker_shut_down_goes_back_though_a_long_poll_was_open() {
    let connected = connect_live().await;
    let name = support::unique("rs.shutdown-requeued");
    // Long-polled for SQS's longest, 20 s, as by default.
    let mut subscriber = connected
        .subscribe_queue(
            SqsQueue::new(&name)
                .create_if_missing()
                .wait(Duration::from_secs(20))
                .visibility(LONG_VISIBILITY)
                .receivers(1),
        )
        .await
        .expect("subscribe");
    let url = subscriber.queue_url().to_owned();
    connected
        .publisher()
        .publish(message(&name, b"held", HeaderMap::new()), None)
        .await
        .expect("publish");
    let held = {
        let mut stream = Box::pin(subscriber.stream());
        next(&mut stream, "a delivery").await
    };
    // The queue is empty: the receiver's next long poll is open at SQS when the shutdown stops
    // it, and outlives the shutdown's wait for it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::time::timeout(Duration::from_secs(30), connected.shutdown())
        .await
        .expect("the shutdown ends")
        .expect("shutdown");
    held.nack(true)
        .await
        .expect("a requeue after the shutdown is answered");
    // Within 20 s of a 60 s visibility timeout: only the requeue makes it visible, and a long
    // poll still open at SQS that took it must give it back.
    until_counts(&url, (1, 0)).await;
    drop(subscriber);
}

/// Whether [`hold_until_released`] may settle what it holds.
static RELEASED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The bodies and receive counts [`hold_until_released`] was handed.
static HANDED: Mutex<Vec<(Vec<u8>, String)>> = Mutex::new(Vec::new());

/// Holds each delivery until [`RELEASED`] (or 20 s), then acks it.
#[subscriber(SqsQueue)]
async fn hold_until_released(body: &Raw<'_>, cx: &mut Context<'_>) -> HandlerOutcome {
    let receives = cx
        .headers()
        .get_str(RECEIVE_COUNT_HEADER)
        .unwrap_or_default()
        .to_owned();
    HANDED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((body.0.to_vec(), receives));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !RELEASED.load(std::sync::atomic::Ordering::Acquire)
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    HandlerOutcome::ack()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_dropped_before_its_broker_shuts_down_has_every_ack_applied() {
    let name = support::unique("rs.shutdown-app-dropped");
    // The five are on the queue before the subscription starts, so its first receive brings
    // them all (sent while it polls, they could come in receives the prefetch holds back).
    let client = support::client().await;
    let url = support::create_queue(&client, &sqs_engine::ruststream::queue_name(&name), 60).await;
    let bodies: Vec<String> = (0..5).map(|i| format!("held {i}")).collect();
    support::send(&client, &url, &bodies).await;
    let broker = SqsBroker::new()
        .endpoint(support::endpoint())
        .region("us-east-1")
        .test_credentials();
    let queue_name = name.clone();
    let app =
        RustStream::new(AppInfo::new("app-dropped", "0.1.0")).with_broker(broker.clone(), |b| {
            b.include(
                hold_until_released
                    .name(queue_name)
                    .workers(nonzero!(1))
                    .create_if_missing()
                    .wait(Duration::from_secs(1))
                    .visibility(LONG_VISIBILITY)
                    .receivers(1),
            );
        });
    let running = app.start().await.expect("the app starts");
    // One is being handled, the other four are received and wait for the worker.
    support::eventually(Duration::from_secs(20), "a handler running", || {
        !HANDED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    })
    .await;
    until_counts(&url, (0, 5)).await;

    // The app's handle goes first, without its shutdown: the service runs on, detached. Then
    // the broker's connection, which the app shares, shuts down while the handler runs.
    drop(running);
    let connected = broker.connect().await.expect("the app's connection");
    let shutting_down = tokio::spawn(connected.shutdown());
    tokio::time::sleep(Duration::from_secs(2)).await;
    RELEASED.store(true, std::sync::atomic::Ordering::Release);
    tokio::time::timeout(Duration::from_secs(30), shutting_down)
        .await
        .expect("the shutdown ends")
        .expect("the shutdown ran")
        .expect("shutdown");
    // Every message the service held is acked and deleted.
    until_counts(&url, (0, 0)).await;
    let mut handed = HANDED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    handed.sort();
    let expected: Vec<(Vec<u8>, String)> = bodies
        .iter()
        .map(|body| (body.clone().into_bytes(), "1".to_owned()))
        .collect();
    assert_eq!(handed, expected, "each handed out once, none again");
}
