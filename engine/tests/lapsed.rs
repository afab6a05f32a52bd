//! A message that waited received for longer than its visibility timeout, with the heartbeat
//! off, is not handed out: SQS hands it out again. Handed out anyway, every message a slow
//! worker took from a full prefetch would be a stale copy whose delete deletes nothing, and the
//! queue would never drain.
//!
//! Runs on the in-process SQS (a test double on tokio's clock) with a paused clock: the
//! minutes it takes cost no real time. The double applies a delete by a stale receipt handle as
//! SQS documents it (it succeeds and deletes nothing), which `stale_receipt.rs` pins against
//! LocalStack's own answer.
//!
//! A visibility timeout of zero hides nothing, and lets nothing lapse.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{Engine, Message, Outcome};

/// Sends `messages` messages to `queue` and builds an engine on it with one receiver, one
/// worker, a prefetch of ten, the heartbeat off and the given visibility timeout.
fn one_slow_worker(
    sqs: &InProcessSqs,
    queue: &str,
    messages: usize,
    visibility: Duration,
) -> Engine {
    for n in 0..messages {
        sqs.send(queue, &format!("m{n}")).expect("sent");
    }
    Engine::builder()
        .api(sqs.clone())
        .queue(queue)
        .receivers(1)
        .workers(1)
        .prefetch(10)
        .visibility_timeout(visibility)
        .heartbeat(false)
        .build()
        .expect("engine")
}

#[tokio::test(start_paused = true)]
async fn a_slow_worker_behind_a_full_prefetch_drains_the_queue_without_the_heartbeat() {
    // Ten messages a receive, one worker taking a second each, a 3 s visibility timeout and
    // no heartbeat: by the time the worker reaches the fourth message of a receive, the rest
    // are visible again.
    let sqs = InProcessSqs::new();
    let queue = "lapsing";
    let engine = one_slow_worker(&sqs, queue, 20, Duration::from_secs(3));
    let handled: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let seen = Arc::clone(&handled);
    let drained = {
        let sqs = sqs.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let counts = sqs.counts(queue);
                if counts.visible + counts.in_flight + counts.delayed == 0 {
                    return;
                }
            }
        }
    };
    let stats = engine
        .run(
            move |message: Message| {
                *seen
                    .lock()
                    .expect("handled")
                    .entry(message.body().to_owned())
                    .or_default() += 1;
                async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    Outcome::Ack
                }
            },
            async {
                tokio::select! {
                    () = drained => {}
                    () = tokio::time::sleep(Duration::from_secs(600)) => {}
                }
            },
        )
        .await
        .expect("runs");
    let handled = handled.lock().expect("handled").clone();
    let counts = sqs.counts(queue);
    assert_eq!(
        counts.visible + counts.in_flight,
        0,
        "the queue drained in 10 minutes: {counts:?}, handled {handled:?}, {stats:?}"
    );
    assert_eq!(handled.len(), 20, "every message was handled: {handled:?}");
    assert!(
        stats.lapsed > 0,
        "messages lapsed in the prefetch and were let go: {stats:?}"
    );
    assert_eq!(
        stats.acked.ok,
        handled.values().map(|times| u64::from(*times)).sum::<u64>(),
        "every message handed out was acknowledged: {stats:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_visibility_timeout_of_zero_lets_nothing_lapse() {
    // A timeout of zero hides nothing: whoever chose it takes the copies it brings, and a
    // message that waited in the prefetch is still handed out.
    let sqs = InProcessSqs::new();
    let queue = "unhidden";
    let engine = one_slow_worker(&sqs, queue, 5, Duration::ZERO);
    let handled: Arc<Mutex<u32>> = Arc::default();
    let seen = Arc::clone(&handled);
    let stats = engine
        .run(
            move |_message: Message| {
                *seen.lock().expect("handled") += 1;
                async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    Outcome::Ack
                }
            },
            tokio::time::sleep(Duration::from_secs(10)),
        )
        .await
        .expect("runs");
    let handled = *handled.lock().expect("handled");
    assert_eq!(stats.lapsed, 0, "nothing lapsed: {stats:?}");
    assert!(
        handled >= 5,
        "messages that waited in the prefetch were handed out: {handled} handled, {stats:?}"
    );
}
