//! The bound on bytes held (`max_held_bytes`): what it counts, and that a message waiting for
//! room under it stays invisible. On the in-process SQS (a test double on tokio's clock).
//!
//! A paused clock is the right tool here: a message waits for room for minutes of tokio's
//! time, longer than its visibility timeout, with no real waiting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{
    AttributeValue, Engine, Message, MessageAttribute, Outcome, ReceiveRequest, SendEntry, SqsApi,
    Stats,
};

/// Seven hundred KiB: two of them do not fit under the smallest bound, 1 MiB.
const BIG: usize = 700 * 1024;

/// A message of `body`, with `attribute` bytes of binary message attribute when not zero.
fn entry(body: &str, attribute: usize) -> SendEntry {
    let attributes = if attribute == 0 {
        Vec::new()
    } else {
        vec![(
            "payload".to_owned(),
            MessageAttribute {
                data_type: "Binary".to_owned(),
                value: AttributeValue::Binary(vec![7; attribute]),
            },
        )]
    };
    SendEntry {
        body: body.to_owned(),
        attributes,
        group_id: None,
        deduplication_id: None,
    }
}

/// An engine on `queue` that holds at most 1 MiB and receives one message a call, with a
/// 30 s visibility timeout.
fn engine(sqs: &InProcessSqs, queue: &str) -> Engine {
    Engine::builder()
        .api(sqs.clone())
        .queue(queue)
        .receivers(1)
        .receive_batch(1)
        .max_held_bytes(1024 * 1024)
        .visibility_timeout(Duration::from_secs(30))
        .build()
        .expect("engine")
}

/// Runs `engine` for `until`, each handler taking `handling` and acking; returns the engine's
/// counts, the bodies handled in order of start, and the most handlers that ran at once.
async fn run(engine: Engine, handling: Duration, until: Duration) -> (Stats, Vec<String>, usize) {
    let started = Arc::new(Mutex::new(Vec::new()));
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (seen, now, peak) = (
        Arc::clone(&started),
        Arc::clone(&running),
        Arc::clone(&most),
    );
    let stats = engine
        .run(
            move |message: Message| {
                seen.lock()
                    .expect("lock")
                    .push(message.body().chars().take(8).collect::<String>());
                let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(at_once, Ordering::SeqCst);
                let now = Arc::clone(&now);
                async move {
                    tokio::time::sleep(handling).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    Outcome::Ack
                }
            },
            tokio::time::sleep(until),
        )
        .await
        .expect("runs");
    let started = started.lock().expect("lock").clone();
    (stats, started, most.load(Ordering::SeqCst))
}

#[tokio::test(start_paused = true)]
async fn a_message_waiting_for_byte_room_stays_invisible_past_its_visibility_timeout() {
    // The first message's body takes 700 KiB of the 1 MiB for two minutes; the second, received
    // next, waits for room all that time, four visibility timeouts.
    let sqs = InProcessSqs::new();
    let queue = "waiting-for-room";
    sqs.send(queue, &format!("first-{}", "x".repeat(BIG)))
        .expect("sent");
    sqs.send(queue, &format!("second-{}", "y".repeat(BIG)))
        .expect("sent");
    let other_consumer = async {
        // Another consumer of the queue, well after the second message's first 30 s.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let url = sqs.queue_url(queue).await.expect("url");
        let request = ReceiveRequest {
            queue_url: &url,
            max_messages: 10,
            wait_time: Duration::ZERO,
            visibility_timeout: 30,
            attempt_id: None,
            system_attributes: &[],
        };
        sqs.receive(&request).await.expect("receive").len()
    };
    let ((stats, started, most), received_elsewhere) = tokio::join!(
        run(
            engine(&sqs, queue),
            Duration::from_secs(120),
            Duration::from_secs(300),
        ),
        other_consumer,
    );
    assert_eq!(
        received_elsewhere, 0,
        "the waiting message became visible and was received again"
    );
    assert_eq!(started, ["first-xx", "second-y"], "each handled once");
    assert_eq!(most, 1, "never both bodies at once");
    assert_eq!(stats.messages_received, 2);
    assert_eq!(stats.acked.ok, 2);
    assert_eq!(stats.late_settlements, 0);
    let counts = sqs.counts(queue);
    assert_eq!((counts.visible, counts.in_flight), (0, 0), "both deleted");
}

#[tokio::test(start_paused = true)]
async fn message_attributes_count_toward_the_bytes_held() {
    // Bodies of a few bytes, each with 700 KiB of binary attribute: SQS counts both toward a
    // message's size, and two such messages are not held at once under 1 MiB.
    let sqs = InProcessSqs::new();
    let queue = "attribute-bytes";
    for body in ["first", "second"] {
        sqs.send_entry(queue, &entry(body, BIG)).expect("sent");
    }
    let (stats, started, most) = run(
        engine(&sqs, queue),
        Duration::from_secs(10),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(started, ["first", "second"]);
    assert_eq!(
        most, 1,
        "the second waited for the first's room: its attribute counted"
    );
    assert_eq!(stats.acked.ok, 2);
}
