//! A handler's deadline (`max_processing_time`, settled by `on_processing_timeout`) and the
//! heartbeat's cap (`max_extension`).
//!
//! The first tests run on the in-process SQS (a test double on tokio's clock) with a paused
//! clock: handlers hang for minutes of tokio's time with no real waiting. The last one proves
//! the deadline against LocalStack, a real SQS.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{BatchOutcome, Engine, Message, Outcome};
use sqs_engine_test_support as support;
use tokio::time::Instant;

/// Counts the handler futures dropped before they finished.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A handler that never finishes; counts its starts and the drops of its futures.
fn hanging(
    starts: &Arc<AtomicUsize>,
    dropped: &Arc<AtomicUsize>,
) -> impl Fn(Message) -> std::pin::Pin<Box<dyn Future<Output = Outcome> + Send>> + Clone + use<> {
    let (starts, dropped) = (Arc::clone(starts), Arc::clone(dropped));
    move |_message: Message| {
        starts.fetch_add(1, Ordering::SeqCst);
        let guard = DropCount(Arc::clone(&dropped));
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Outcome::Ack
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_handler_past_max_processing_time_is_cancelled_and_its_message_settled_by_the_policy() {
    let sqs = InProcessSqs::new();
    let queue = "hangs";
    sqs.send(queue, "stuck").expect("sent");
    let engine = Engine::builder()
        .api(sqs.clone())
        .queue(queue)
        .max_processing_time(Duration::from_secs(10))
        .on_processing_timeout(Outcome::Drop)
        .build()
        .expect("engine");
    let (starts, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let started = Instant::now();
    let stats = engine
        .run(
            hanging(&starts, &dropped),
            tokio::time::sleep(Duration::from_secs(60)),
        )
        .await
        .expect("runs");
    assert_eq!(starts.load(Ordering::SeqCst), 1, "handled once");
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the hanging handler was cancelled"
    );
    assert_eq!(stats.dropped.ok, 1, "settled by on_processing_timeout");
    let counts = sqs.counts(queue);
    assert_eq!((counts.visible, counts.in_flight), (0, 0), "deleted");
    assert!(started.elapsed() >= Duration::from_secs(60));
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_message_backs_off_by_the_error_policy_unless_told_otherwise() {
    // No on_processing_timeout: the on_handler_error policy, here a retry after 30 s.
    let sqs = InProcessSqs::new();
    let queue = "hangs-and-returns";
    sqs.send(queue, "stuck").expect("sent");
    let engine = Engine::builder()
        .api(sqs.clone())
        .queue(queue)
        .max_processing_time(Duration::from_secs(5))
        .on_handler_error(Outcome::RetryAfter(Duration::from_secs(30)))
        .build()
        .expect("engine");
    let (starts, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // Starts at 0, 35 and 70 s (5 s running, 30 s away); the run ends at 100 s.
    let stats = engine
        .run(
            hanging(&starts, &dropped),
            tokio::time::sleep(Duration::from_secs(100)),
        )
        .await
        .expect("runs");
    assert_eq!(starts.load(Ordering::SeqCst), 3);
    assert_eq!(stats.retried_after.ok, 3);
    assert_eq!(stats.dropped.ok + stats.acked.ok, 0);
}

#[tokio::test(start_paused = true)]
async fn a_batch_past_max_processing_time_settles_each_message_by_the_policy() {
    let sqs = InProcessSqs::new();
    let queue = "batch-hangs";
    for body in ["a", "b", "c"] {
        sqs.send(queue, body).expect("sent");
    }
    let engine = Engine::builder()
        .api(sqs.clone())
        .queue(queue)
        .receivers(1)
        .max_processing_time(Duration::from_secs(10))
        .on_processing_timeout(Outcome::Drop)
        .build()
        .expect("engine");
    let batches = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&batches);
    let stats = engine
        .run_batches(
            move |_messages: Vec<Message>| {
                counted.fetch_add(1, Ordering::SeqCst);
                async {
                    std::future::pending::<()>().await;
                    BatchOutcome::All(Outcome::Ack)
                }
            },
            tokio::time::sleep(Duration::from_secs(60)),
        )
        .await
        .expect("runs");
    assert_eq!(stats.dropped.ok, 3, "every message settled by the policy");
    assert_eq!(sqs.counts(queue).visible + sqs.counts(queue).in_flight, 0);
    assert!(batches.load(Ordering::SeqCst) >= 1);
}

#[tokio::test(start_paused = true)]
async fn the_heartbeat_stops_extending_at_max_extension() {
    // A handler that runs 10 minutes, a 20 s visibility timeout, and a 60 s cap: the message
    // comes back (its second receive starts a second handler) once the cap and its last
    // extension have passed, not before; without the cap it stays hidden for the 10 minutes.
    for (cap, expected_second_start) in [(Some(60), Some(60..=80)), (None, None)] {
        let sqs = InProcessSqs::new();
        let queue = "long-handler";
        sqs.send(queue, "long").expect("sent");
        let mut builder = Engine::builder()
            .api(sqs.clone())
            .queue(queue)
            .visibility_timeout(Duration::from_secs(20));
        if let Some(cap) = cap {
            builder = builder.max_extension(Duration::from_secs(cap));
        }
        let engine = builder.build().expect("engine");
        let begun = Instant::now();
        let starts = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&starts);
        engine
            .run(
                move |_message: Message| {
                    seen.lock().expect("starts").push(begun.elapsed().as_secs());
                    async {
                        tokio::time::sleep(Duration::from_secs(600)).await;
                        Outcome::Ack
                    }
                },
                tokio::time::sleep(Duration::from_secs(300)),
            )
            .await
            .expect("runs");
        let starts = starts.lock().expect("starts").clone();
        match expected_second_start {
            Some(range) => {
                assert!(
                    starts.len() >= 2 && range.contains(&starts[1]),
                    "cap {cap:?}: handler starts at {starts:?} s"
                );
            }
            None => assert_eq!(starts, [0], "cap {cap:?}: handler starts"),
        }
    }
}

#[tokio::test]
async fn on_localstack_a_hanging_handler_is_cancelled_and_its_message_dropped() {
    let client = support::client().await;
    let queue = support::unique("hang");
    let url = support::create_queue(&client, &queue, 30).await;
    support::send(&client, &url, &["hang".to_owned(), "quick".to_owned()]).await;
    let engine = support::builder(&queue)
        .await
        .max_processing_time(Duration::from_secs(2))
        .on_processing_timeout(Outcome::Drop)
        .build()
        .expect("engine");
    let stats = engine.stats();
    let handled = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&handled);
    let running = support::spawn_engine(engine, move |message: Message| {
        let seen = Arc::clone(&seen);
        async move {
            if message.body() == "hang" {
                std::future::pending::<()>().await;
            }
            seen.lock()
                .expect("handled")
                .push(message.body().to_owned());
            Outcome::Ack
        }
    });
    support::eventually(Duration::from_secs(30), "both messages settled", || {
        let now = stats.snapshot();
        now.acked.ok == 1 && now.dropped.ok == 1
    })
    .await;
    let stats = running.shutdown().await;
    assert_eq!(stats.acked.ok, 1);
    assert_eq!(stats.dropped.ok, 1);
    assert_eq!(*handled.lock().expect("handled"), ["quick"]);
    assert_eq!(support::counts(&client, &url).await, (0, 0), "both gone");
    support::delete_queue(&client, &url).await;
}
