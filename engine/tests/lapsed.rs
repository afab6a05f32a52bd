//! A message that waited received for longer than its visibility timeout, with the heartbeat
//! off, is not handed out: SQS hands it out again. Handed out anyway, every message a slow
//! worker took from a full prefetch would be a stale copy whose delete deletes nothing, and the
//! queue would never drain.
//!
//! The first two tests run on the in-process SQS (a test double on tokio's clock) with a paused
//! clock: the minutes they take cost no real time. The double applies a delete by a stale
//! receipt handle as SQS documents it (it succeeds and deletes nothing), which
//! `stale_receipt.rs` pins against LocalStack's own answer.
//!
//! Once a handler's time is known, the receivers keep no more messages waiting than the workers
//! start in half a visibility timeout, so that messages stop lapsing.
//!
//! A visibility timeout of zero hides nothing, and lets nothing lapse.
//!
//! The last test runs on LocalStack, in real time: a lapsed message is let go, counted, and
//! handled when SQS hands it out again. LocalStack deletes a message even by a stale receipt
//! handle, so the queue that never drains cannot be shown there; the rule itself can.

use sqs_engine_test_support as support;

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
async fn a_slow_worker_drains_the_queue_without_the_heartbeat_and_only_the_first_receive_lapses() {
    // Ten messages a receive, one worker taking a second each, a 3 s visibility timeout and
    // no heartbeat: by the time the worker reaches the fourth message of the first receive
    // (made before a handler's time is known), the rest are visible again. From then on the
    // receivers keep no more messages waiting than the worker starts in half a visibility
    // timeout.
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
    println!("{stats:?}");
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
    assert!(
        stats.lapsed <= 10,
        "only messages of the first receive lapsed: {stats:?}"
    );
    assert_eq!(
        stats.late_settlements, 0,
        "every message handed out was settled within its visibility timeout: {stats:?}"
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

#[tokio::test]
async fn on_localstack_a_lapsed_message_is_let_go_counted_and_handled_when_it_comes_back() {
    // Ten messages in one receive, one worker taking 600 ms each, a 2 s visibility timeout
    // and no heartbeat: the worker reaches the fourth message of the receive before its
    // visibility lapses, and the rest only after.
    const MESSAGES: usize = 10;
    let visibility = Duration::from_secs(2);
    let client = support::client().await;
    let name = support::unique("lapsing");
    let url = support::create_queue(&client, &name, 2).await;
    let bodies: Vec<String> = (0..MESSAGES).map(|n| format!("m{n}")).collect();
    support::send(&client, &url, &bodies).await;

    let engine = support::builder(&name)
        .await
        .receivers(1)
        .workers(1)
        .prefetch(MESSAGES)
        .visibility_timeout(visibility)
        .heartbeat(false)
        .build()
        .expect("engine");
    let stats = engine.stats();
    // Each handling: the body and the message's receive count.
    let handled: Arc<Mutex<Vec<(String, u32)>>> = Arc::default();
    let seen = Arc::clone(&handled);
    let running = support::spawn_engine(engine, move |message: Message| {
        seen.lock()
            .expect("handled")
            .push((message.body().to_owned(), message.receive_count()));
        async move {
            tokio::time::sleep(Duration::from_millis(600)).await;
            Outcome::Ack
        }
    });
    let distinct = |handled: &[(String, u32)]| {
        handled
            .iter()
            .map(|(body, _)| body.as_str())
            .collect::<std::collections::HashSet<_>>()
            .len()
    };
    let all_acked = {
        let handled = Arc::clone(&handled);
        move || {
            let handled = handled.lock().expect("handled");
            distinct(&handled) == MESSAGES && stats.snapshot().acked.ok >= handled.len() as u64
        }
    };
    support::eventually(
        Duration::from_secs(90),
        "every message handled and acknowledged",
        all_acked,
    )
    .await;
    let stats = running.shutdown().await;
    let handled = handled.lock().expect("handled").clone();

    assert!(
        stats.lapsed > 0,
        "messages lapsed in the prefetch and were let go: {stats:?}"
    );
    assert!(
        handled.iter().any(|(_, receives)| *receives > 1),
        "a message let go came back and was handled: {handled:?}"
    );
    assert_eq!(
        (stats.acked.ok, stats.acked.failed),
        (handled.len() as u64, 0),
        "every handling was acknowledged: {stats:?}"
    );
    assert_eq!(
        support::counts(&client, &url).await,
        (0, 0),
        "the queue drained: {stats:?}, handled {handled:?}"
    );
}
