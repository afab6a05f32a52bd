//! Settlements share batch calls, and each entry's answer is its own, on LocalStack.

use sqs_engine_test_support as support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqs_engine::{BatchOutcome, EntryResult, Message, Outcome};
use support::*;

/// The bodies and receive counts of one batch handler call.
type Batch = Vec<(String, u32)>;

/// The largest refund paid without approval, in cents.
const APPROVAL_LIMIT_CENTS: u64 = 50_000;

/// The seed's refunds: each message of a batch settles on its own. The small refunds are
/// deleted, the large one waits on the queue and comes back alone after its delay.
#[tokio::test]
async fn a_batch_settles_message_by_message() {
    let client = client().await;
    let name = unique("refunds");
    let url = create_queue(&client, &name, 30).await;
    let bodies = ["1:1000", "2:90000", "3:2500"].map(str::to_owned);
    send(&client, &url, &bodies).await;

    let approval = Duration::from_secs(2);
    let batches: Arc<Mutex<Vec<Batch>>> = Arc::default();
    let engine = builder(&name)
        .await
        .receivers(1)
        .build()
        .expect("valid settings");
    let seen = Arc::clone(&batches);
    let running = spawn_batch_engine(engine, move |messages: Vec<Message>| {
        seen.lock().expect("lock").push(
            messages
                .iter()
                .map(|m| (m.body().to_owned(), m.receive_count()))
                .collect(),
        );
        let outcomes: Vec<Outcome> = messages
            .iter()
            .map(|m| {
                let cents: u64 = m
                    .body()
                    .split(':')
                    .nth(1)
                    .and_then(|c| c.parse().ok())
                    .expect("a refund body");
                // Approved by the time it comes back.
                if cents > APPROVAL_LIMIT_CENTS && m.receive_count() == 1 {
                    Outcome::RetryAfter(approval)
                } else {
                    Outcome::Ack
                }
            })
            .collect();
        async move { BatchOutcome::Each(outcomes) }
    });
    eventually(Duration::from_secs(15), "the large refund back", || {
        batches.lock().expect("lock").len() >= 2
    })
    .await;
    // Nothing else comes back.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stats = running.shutdown().await;

    let batches = batches.lock().expect("lock").clone();
    assert_eq!(batches.len(), 2, "{batches:?}");
    let mut first: Vec<_> = batches[0].iter().map(|(b, _)| b.as_str()).collect();
    first.sort_unstable();
    assert_eq!(
        first,
        ["1:1000", "2:90000", "3:2500"],
        "one receive, one batch"
    );
    assert_eq!(
        batches[1],
        [("2:90000".to_owned(), 2)],
        "the large refund alone"
    );
    assert_eq!(stats.acked.ok, 3);
    assert_eq!(stats.retried_after.ok, 1);
    assert_eq!(counts(&client, &url).await, (0, 0));
}

/// With a visibility timeout of zero the same message is received again while its earlier
/// delivery is still being handled, so two deliveries of one message settle in the same flush
/// window: each delete is held back a second, so the acks made while one is out wait (up to
/// `max_batch_wait`, a second) to share the next. Entry ids are positions and receipt handles
/// are distinct, so no batch is refused.
#[tokio::test]
async fn a_message_received_twice_and_settled_together_never_repeats_a_receipt_handle_in_a_batch() {
    let client = client().await;
    let name = unique("twice");
    let url = create_queue(&client, &name, 30).await;
    send(&client, &url, &["twice".to_owned()]).await;

    let recording = Recording::new(None)
        .await
        .with_delete_delay(Duration::from_secs(1));
    let engine = sqs_engine::Engine::builder()
        .api(recording.clone())
        .queue(&name)
        .wait_time(Duration::from_secs(1))
        .receivers(4)
        .visibility_timeout(Duration::ZERO)
        .max_batch_wait(Duration::from_secs(1))
        .build()
        .expect("valid settings");
    let stats = engine.stats();
    let running = spawn_engine(engine, |_message: Message| async move {
        // Long enough for the other receivers to get the same message meanwhile.
        tokio::time::sleep(Duration::from_millis(300)).await;
        Outcome::Ack
    });
    eventually(
        Duration::from_secs(20),
        "several deliveries settled",
        || stats.snapshot().acked.total() >= 4,
    )
    .await;
    let stats = running.shutdown().await;

    let (batches, received) = {
        let record = recording.record.lock().expect("lock");
        (record.batches.clone(), record.received.clone())
    };
    let deletes: Vec<_> = batches
        .iter()
        .filter(|b| b.action == "DeleteMessageBatch")
        .collect();
    assert!(!deletes.is_empty());
    let mut shared_a_batch = false;
    for batch in &deletes {
        let mut handles = batch.receipt_handles.clone();
        handles.sort_unstable();
        handles.dedup();
        assert_eq!(
            handles.len(),
            batch.receipt_handles.len(),
            "a receipt handle appears twice in {batch:?}"
        );
        assert!(
            batch.result.is_ok(),
            "the whole call was refused: {:?}",
            batch.result
        );
        let ids: Vec<_> = batch
            .receipt_handles
            .iter()
            .filter_map(|h| received.get(h))
            .collect();
        shared_a_batch |= ids.len() >= 2 && ids.iter().all(|id| *id == ids[0]);
    }
    assert!(
        shared_a_batch,
        "no batch carried two deliveries of the message: the scenario did not happen"
    );
    assert!(stats.acked.ok >= 1);
    assert_eq!(counts(&client, &url).await, (0, 0));
}

/// A `DeleteMessageBatch` in which one receipt handle is invalid fails that message alone:
/// the call itself succeeds and the others are gone.
#[tokio::test]
async fn an_invalid_receipt_handle_fails_its_own_entry_and_no_other() {
    let client = client().await;
    let name = unique("invalid-handle");
    let url = create_queue(&client, &name, 30).await;
    let bodies: Vec<String> = (0..5).map(|i| format!("m{i}")).collect();
    send(&client, &url, &bodies).await;

    let recording = Recording::new(Some("m2")).await;
    let engine = sqs_engine::Engine::builder()
        .api(recording.clone())
        .queue(&name)
        .wait_time(Duration::from_secs(1))
        .receivers(1)
        .build()
        .expect("valid settings");
    let stats = engine.stats();
    let seen = Arc::new(Mutex::new(0usize));
    let handler_seen = Arc::clone(&seen);
    // A batch handler settles all its messages at once, so they share one batch call.
    let running = spawn_batch_engine(engine, move |messages: Vec<Message>| {
        *handler_seen.lock().expect("lock") += messages.len();
        async move { BatchOutcome::All(Outcome::Ack) }
    });
    eventually(Duration::from_secs(20), "five answers", || {
        stats.snapshot().acked.total() == 5
    })
    .await;
    let stats = running.shutdown().await;

    assert_eq!(stats.acked.ok, 4);
    assert_eq!(stats.acked.failed, 1);
    assert_eq!(
        stats.delete_message_batch.failed, 0,
        "no call failed as a whole"
    );
    let batches = recording.batches();
    let with_invalid = batches
        .iter()
        .find(|b| b.receipt_handles.iter().any(|h| h == INVALID_RECEIPT))
        .expect("the invalid handle was sent");
    assert!(
        with_invalid.receipt_handles.len() > 1,
        "the invalid entry shared its call with others: {with_invalid:?}"
    );
    let results = with_invalid.result.as_ref().expect("the call succeeded");
    for (handle, result) in with_invalid.receipt_handles.iter().zip(results) {
        if handle == INVALID_RECEIPT {
            assert!(
                matches!(result, EntryResult::Failed(f) if !f.is_transient()),
                "{result:?}"
            );
        } else {
            assert_eq!(result, &EntryResult::Ok);
        }
    }
    // The message whose settlement failed is still on the queue (in flight); the rest are gone.
    assert_eq!(counts(&client, &url).await, (0, 1));
    assert_eq!(*seen.lock().expect("lock"), 5);
}
