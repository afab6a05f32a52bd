//! Shutdown sends every settlement a handler made, on LocalStack.

use sqs_engine_test_support as support;

use std::time::Duration;

use sqs_engine::{Message, Outcome};
use support::*;

/// Settlements wait up to a second for company, one call at a time, and shutdown comes the
/// moment the last handler returns: it must send what is still pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_message_is_gone_after_shutdown() {
    const MESSAGES: usize = 57;
    let client = client().await;
    let name = unique("shutdown");
    let url = create_queue(&client, &name, 30).await;
    let bodies: Vec<String> = (0..MESSAGES).map(|i| format!("m{i}")).collect();
    send(&client, &url, &bodies).await;

    let engine = builder(&name)
        .await
        .max_batch_wait(Duration::from_secs(1))
        .max_batches_in_flight(1)
        .build()
        .expect("valid settings");
    let (stats, handled) = ack_until_handled(engine, MESSAGES, Duration::from_secs(60)).await;

    assert_eq!(handled, MESSAGES);
    assert_eq!(stats.acked.ok, MESSAGES as u64, "{stats:?}");
    assert_eq!(
        counts(&client, &url).await,
        (0, 0),
        "every acked message is gone"
    );
}

/// Messages received but not yet started when shutdown comes go back at once (visibility 0)
/// rather than waiting out their visibility timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_received_but_not_started_are_returned_at_shutdown() {
    let client = client().await;
    let name = unique("shutdown-return");
    let url = create_queue(&client, &name, 60).await;
    let bodies: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    send(&client, &url, &bodies).await;

    let engine = builder(&name)
        .await
        .workers(1)
        .receivers(1)
        .prefetch(10)
        .shutdown_timeout(Duration::from_secs(5))
        .build()
        .expect("valid settings");
    let stats = engine.stats();
    let running = spawn_engine(engine, |_message: Message| async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        Outcome::Ack
    });
    eventually(Duration::from_secs(20), "a full prefetch", || {
        stats.snapshot().messages_received >= 10
    })
    .await;
    let stats = running.shutdown().await;

    let received = stats.messages_received;
    let acked = stats.acked.ok;
    assert!(received > acked, "some were still waiting: {stats:?}");
    assert_eq!(
        stats.retried.ok,
        received - acked,
        "each one not started went back"
    );
    let (visible, in_flight) = counts(&client, &url).await;
    assert_eq!(in_flight, 0, "none left waiting out its visibility");
    assert_eq!(visible, 20 - acked);
}

/// An idle engine, its one receiver in a 20 s long poll (an idle queue keeps one), shuts down
/// within a few round trips of the signal: a poll under way gets four measured round trips to
/// answer, not a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_engine_shuts_down_within_a_few_round_trips() {
    let client = client().await;
    let name = unique("shutdown-idle");
    create_queue(&client, &name, 30).await;
    let engine = builder(&name)
        .await
        .wait_time(Duration::from_secs(20))
        .build()
        .expect("valid settings");
    let running = spawn_engine(engine, |_message: Message| async { Outcome::Ack });
    // The receiver is in its long poll.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let signalled = tokio::time::Instant::now();
    let stats = running.shutdown().await;
    let took = signalled.elapsed();
    assert!(
        took < Duration::from_millis(500),
        "shutdown took {took:?} with nothing to do"
    );
    assert_eq!(
        stats.abandoned_receives, 1,
        "the one long poll of an idle queue was given up"
    );
}
