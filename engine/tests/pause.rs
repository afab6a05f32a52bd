//! Pausing and resuming receiving at run time (`Engine::pause_handle`).
//!
//! The first test runs on the in-process SQS (a test double on tokio's clock) with a paused
//! clock, so that minutes of pause take no real time; the second proves it against LocalStack.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{Engine, Message, Outcome};
use sqs_engine_test_support as support;
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn a_paused_engine_receives_nothing_while_the_messages_it_holds_stay_invisible() {
    // One message is being handled for 3 minutes (visibility 30 s) when receiving pauses at
    // 10 s; messages sent at 20 s wait until the resume at 240 s. The held one is extended
    // all along: it is handled once.
    let sqs = InProcessSqs::new();
    let queue = "pausing";
    sqs.send(queue, "long").expect("sent");
    let engine = Engine::builder()
        .api(sqs.clone())
        .queue(queue)
        .visibility_timeout(Duration::from_secs(30))
        .build()
        .expect("engine");
    let pause = engine.pause_handle();
    let begun = Instant::now();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&starts);
    let control = {
        let sqs = sqs.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            pause.pause();
            tokio::time::sleep(Duration::from_secs(10)).await;
            for body in ["a", "b", "c"] {
                sqs.send(queue, body).expect("sent");
            }
            tokio::time::sleep(Duration::from_secs(220)).await;
            pause.resume();
        }
    };
    let run = engine.run(
        move |message: Message| {
            seen.lock()
                .expect("starts")
                .push((message.body().to_owned(), begun.elapsed().as_secs()));
            async move {
                if message.body() == "long" {
                    tokio::time::sleep(Duration::from_secs(180)).await;
                }
                Outcome::Ack
            }
        },
        tokio::time::sleep(Duration::from_secs(300)),
    );
    let (stats, ()) = tokio::join!(run, control);
    let stats = stats.expect("runs");
    let starts = starts.lock().expect("starts").clone();
    let long: Vec<_> = starts.iter().filter(|(body, _)| body == "long").collect();
    assert_eq!(
        long.len(),
        1,
        "the held message was kept invisible: {starts:?}"
    );
    for (body, at) in starts.iter().filter(|(body, _)| body != "long") {
        assert!(
            *at >= 240,
            "{body} started at {at} s, while receiving was paused"
        );
    }
    assert_eq!(stats.acked.ok, 4, "{starts:?}");
}

#[tokio::test]
async fn on_localstack_nothing_is_received_while_paused_and_everything_after_the_resume() {
    let client = support::client().await;
    let queue = support::unique("pause");
    let url = support::create_queue(&client, &queue, 30).await;
    let engine = support::builder(&queue).await.build().expect("engine");
    let pause = engine.pause_handle();
    pause.pause();
    let handled = Arc::new(AtomicUsize::new(0));
    let running = support::spawn_engine(engine, support::counting_acks(&handled));
    let bodies: Vec<String> = (0..5).map(|n| format!("m{n}")).collect();
    support::send(&client, &url, &bodies).await;
    // Three long polls' worth (the test builder waits 1 s a poll).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(handled.load(Ordering::SeqCst), 0, "received while paused");
    assert_eq!(
        support::counts(&client, &url).await,
        (5, 0),
        "all still waiting"
    );
    pause.resume();
    support::eventually(Duration::from_secs(30), "all five handled", || {
        handled.load(Ordering::SeqCst) == 5
    })
    .await;
    let stats = running.shutdown().await;
    assert_eq!(stats.acked.ok, 5);
    support::delete_queue(&client, &url).await;
}
