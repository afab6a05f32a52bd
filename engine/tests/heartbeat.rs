//! The heartbeat keeps slow messages invisible, in batch calls, on LocalStack.

use sqs_engine_test_support as support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqs_engine::{Message, Outcome, Stats};
use support::*;

const VISIBILITY: Duration = Duration::from_secs(4);
const MESSAGES: usize = 100;

/// Held by the tests whose messages are extended, one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sends `MESSAGES` messages to a new queue with `visibility`, consumes them with handlers
/// that take `handling` each (as many workers as messages), and checks none was handed out
/// again while its handler ran. Returns the engine's counts.
async fn consume_slowly(prefix: &str, visibility: Duration, handling: Duration) -> Stats {
    let client = client().await;
    let name = unique(prefix);
    let url = create_queue(&client, &name, visibility.as_secs() as u32).await;
    let bodies: Vec<String> = (0..MESSAGES).map(|i| format!("slow-{i}")).collect();
    send(&client, &url, &bodies).await;

    let deliveries: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let engine = builder(&name)
        .await
        .workers(MESSAGES)
        .build()
        .expect("valid settings");
    let stats = engine.stats();
    let seen = Arc::clone(&deliveries);
    let running = spawn_engine(engine, move |message: Message| {
        *seen
            .lock()
            .expect("lock")
            .entry(message.id().to_owned())
            .or_default() += 1;
        async move {
            tokio::time::sleep(handling).await;
            Outcome::Ack
        }
    });
    eventually(Duration::from_secs(60), "every message acked", || {
        stats.snapshot().acked.ok == MESSAGES as u64
    })
    .await;
    let stats = running.shutdown().await;

    let deliveries = deliveries.lock().expect("lock").clone();
    println!("{stats:?}");
    assert_eq!(deliveries.len(), MESSAGES);
    assert!(
        deliveries.values().all(|&n| n == 1),
        "a message was handed out again while its handler ran: {:?}",
        deliveries.values().filter(|&&n| n > 1).count()
    );
    assert_eq!(stats.messages_received, MESSAGES as u64);
    assert_eq!(stats.extensions.failed, 0);
    assert_eq!(stats.late_settlements, 0);
    assert_eq!(counts(&client, &url).await, (0, 0));
    stats
}

/// Handlers that take three times the visibility timeout: no message is handed out again while
/// its handler runs, and the extensions of all of them share batch calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_handlers_keep_their_messages_and_extensions_go_out_in_batches() {
    let _serial = SERIAL.lock().await;
    let handling = VISIBILITY * 3;
    let stats = consume_slowly("heartbeat", VISIBILITY, handling).await;
    let calls = stats.change_message_visibility_batch.total() as f64;
    let periods = handling.as_secs_f64() / VISIBILITY.as_secs_f64();
    let per_message_per_period = calls / MESSAGES as f64 / periods;
    let entries_per_call = stats.visibility_entries as f64 / calls;
    println!(
        "heartbeat: {calls} calls, {} extensions, {entries_per_call:.1} entries per call, \
         {per_message_per_period:.3} calls per message per visibility period",
        stats.extensions.ok
    );
    assert!(
        stats.extensions.ok >= (MESSAGES * 2) as u64,
        "each message was extended at least twice"
    );
    assert!(
        entries_per_call >= 8.0,
        "{entries_per_call:.1} entries per call"
    );
    assert!(
        per_message_per_period <= 0.15,
        "{per_message_per_period:.3} calls per message per visibility period"
    );
}

/// Receive batches come back at scattered times, so their messages fall due for extension at
/// scattered times too: the heartbeat extends a message a little early (within one margin) to
/// fill a call that goes out anyway. 100 messages, a 2 s visibility timeout, 6 s handlers:
/// counted from LocalStack's own log, the extensions cost at most 0.12 calls per message per
/// visibility period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extensions_falling_due_at_scattered_times_share_full_calls() {
    // LocalStack's log counts every client's calls: no other test of this file extends meanwhile.
    let _serial = SERIAL.lock().await;
    const SHORT: Duration = Duration::from_secs(2);
    let handling = SHORT * 3;
    let log_before = read_log();
    let stats = consume_slowly("heartbeat-fill", SHORT, handling).await;
    // Let LocalStack write its last lines.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let log_after = read_log();
    let new_lines = log_after
        .get(log_before.len()..)
        .expect("the log only grew during the run");
    let logged = logged_calls(new_lines, "ChangeMessageVisibilityBatch");
    assert_eq!(
        logged as u64,
        stats.change_message_visibility_batch.total(),
        "LocalStack saw the calls the engine counted"
    );
    let periods = handling.as_secs_f64() / SHORT.as_secs_f64();
    let per_message_per_period = logged as f64 / MESSAGES as f64 / periods;
    println!(
        "heartbeat at 2 s: {logged} calls for {} extensions, {per_message_per_period:.3} calls per \
         message per visibility period",
        stats.extensions.ok
    );
    assert!(
        per_message_per_period <= 0.12,
        "{per_message_per_period:.3} calls per message per visibility period"
    );
}

/// A handler faster than the visibility margin costs no extension at all.
#[tokio::test]
async fn fast_handlers_cost_no_extension() {
    let client = client().await;
    let name = unique("heartbeat-fast");
    let url = create_queue(&client, &name, VISIBILITY.as_secs() as u32).await;
    let bodies: Vec<String> = (0..20).map(|i| format!("fast-{i}")).collect();
    send(&client, &url, &bodies).await;

    let engine = builder(&name).await.build().expect("valid settings");
    let stats = engine.stats();
    let running = spawn_engine(engine, |_message: Message| async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Outcome::Ack
    });
    eventually(Duration::from_secs(20), "all acked", || {
        stats.snapshot().acked.ok == 20
    })
    .await;
    let stats = running.shutdown().await;
    assert_eq!(stats.change_message_visibility_batch.total(), 0);
    assert_eq!(stats.extensions.total(), 0);
}

/// A delivery whose handler panics stops being extended: it comes back when the visibility
/// it had lapses, not later.
#[tokio::test]
async fn an_unsettled_delivery_stops_being_extended() {
    let client = client().await;
    let name = unique("heartbeat-unsettled");
    let url = create_queue(&client, &name, VISIBILITY.as_secs() as u32).await;
    send(&client, &url, &["boom".to_owned()]).await;

    let seen: Arc<Mutex<Vec<tokio::time::Instant>>> = Arc::default();
    let engine = builder(&name).await.build().expect("valid settings");
    let stats = engine.stats();
    let handler_seen = Arc::clone(&seen);
    let running = spawn_engine(engine, move |message: Message| {
        handler_seen
            .lock()
            .expect("lock")
            .push(tokio::time::Instant::now());
        async move {
            if message.receive_count() == 1 {
                panic!("handler failure on the first delivery (expected by the test)");
            }
            Outcome::Ack
        }
    });
    eventually(Duration::from_secs(20), "the second delivery", || {
        seen.lock().expect("lock").len() >= 2
    })
    .await;
    let stats_then = stats.snapshot();
    running.shutdown().await;
    let seen = seen.lock().expect("lock").clone();
    let back_after = seen[1] - seen[0];
    assert!(
        back_after < VISIBILITY + Duration::from_secs(2),
        "back after {back_after:?}: it was extended after its handler failed"
    );
    assert_eq!(stats_then.extensions.total(), 0);
}
