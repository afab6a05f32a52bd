//! The cost of consuming: SQS calls per message at full load, on LocalStack, counted by the
//! engine and checked against LocalStack's own request log.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqs_engine::{Message, Outcome};
use support::*;
use tokio_util::sync::CancellationToken;

const MESSAGES: usize = 10_000;

/// Counts the requests of each action in LocalStack's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_acks_cost_at_most_0_21_calls_per_message() {
    let client = client().await;
    let name = unique("cost");
    let url = create_queue(&client, &name, 60).await;
    let bodies: Vec<String> = (0..MESSAGES).map(|i| format!("{i:0>200}")).collect();
    let senders: Vec<_> = bodies
        .chunks(MESSAGES / 8)
        .map(|chunk| {
            let client = client.clone();
            let url = url.clone();
            let chunk = chunk.to_vec();
            tokio::spawn(async move { send(&client, &url, &chunk).await })
        })
        .collect();
    for sender in senders {
        sender.await.expect("send task");
    }

    let log_before = read_log();
    let engine = builder(&name).await.build().expect("valid settings");
    let stop = CancellationToken::new();
    let handled = Arc::new(AtomicUsize::new(0));
    let handler_handled = Arc::clone(&handled);
    let handler_stop = stop.clone();
    let stats = tokio::time::timeout(
        Duration::from_secs(300),
        engine.run(
            move |_message: Message| {
                if handler_handled.fetch_add(1, Ordering::Relaxed) + 1 == MESSAGES {
                    handler_stop.cancel();
                }
                async { Outcome::Ack }
            },
            stop.clone().cancelled_owned(),
        ),
    )
    .await
    .expect("10,000 messages consumed within 300 s")
    .expect("the engine runs");
    // Let LocalStack write its last lines.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let log_after = read_log();
    let new_lines = log_after
        .get(log_before.len()..)
        .expect("the log only grew during the run");

    let receives = stats.receive_message.total() + stats.abandoned_receives;
    let deletes = stats.delete_message_batch.total();
    let per_message = (receives + deletes) as f64 / MESSAGES as f64;
    println!(
        "receives {receives}, deletes {deletes}, calls per message {per_message:.4}, {stats:?}"
    );
    assert_eq!(stats.acked.ok, MESSAGES as u64);
    assert!(
        per_message <= 0.21,
        "{per_message:.4} calls per message (receives {receives}, deletes {deletes})"
    );
    assert_eq!(
        logged_calls(new_lines, "ReceiveMessage") as u64,
        receives,
        "LocalStack saw the receives the engine counted"
    );
    assert_eq!(
        logged_calls(new_lines, "DeleteMessageBatch") as u64,
        deletes,
        "LocalStack saw the deletes the engine counted"
    );
    assert_eq!(
        logged_calls(new_lines, "DeleteMessage"),
        0,
        "no single deletes"
    );
    assert_eq!(counts(&client, &url).await, (0, 0));
}
