//! `max_receive_rate`: the receivers take no more messages a second than the cap, and nothing
//! waits in the prefetch for it.
//!
//! The first test runs on the in-process SQS (a test double on tokio's clock) with a paused
//! clock, so that the rate is exact; the second proves the cap against LocalStack, where only
//! the upper bound is asserted (a slow machine receives less, never more).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{Engine, Error, Message, Outcome};
use sqs_engine_test_support as support;
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn the_receivers_take_no_more_than_the_cap_and_hold_no_more_than_a_batch_ahead() {
    let sqs = InProcessSqs::new();
    let queue = "capped";
    for n in 0..1_000 {
        sqs.send(queue, &format!("m{n}")).expect("sent");
    }
    let engine = Engine::builder()
        .api(sqs.clone())
        .queue(queue)
        .max_receive_rate(20.0)
        .build()
        .expect("engine");
    let stats = engine.stats();
    let handled = Arc::new(AtomicUsize::new(0));
    let begun = Instant::now();
    let run = tokio::spawn(engine.run(
        support::counting_acks(&handled),
        tokio::time::sleep(Duration::from_secs(30)),
    ));
    for second in 1..=29_u32 {
        tokio::time::sleep_until(begun + Duration::from_secs(u64::from(second))).await;
        let received = stats.snapshot().messages_received;
        let cap = 20 * u64::from(second) + 10;
        assert!(
            received <= cap,
            "{received} received after {second} s, over the cap of 20 a second and one batch"
        );
        let waiting = received - handled.load(Ordering::SeqCst) as u64;
        assert!(
            waiting <= 10,
            "{waiting} received and not yet handled after {second} s: the prefetch ran ahead"
        );
    }
    let stats = run.await.expect("joined").expect("runs");
    assert!(
        stats.messages_received >= 20 * 29,
        "the cap is reached, not undershot: {} in 30 s",
        stats.messages_received
    );
}

#[tokio::test]
async fn a_rate_out_of_range_is_refused_by_name() {
    for bad in [0.0, f64::NAN, -5.0, f64::INFINITY] {
        let built = Engine::builder()
            .api(InProcessSqs::new())
            .queue("q")
            .max_receive_rate(bad)
            .build();
        match built {
            Err(Error::Config(error)) => {
                assert!(error.to_string().contains("max_receive_rate"), "{error}");
            }
            other => panic!("{bad} was not refused: {other:?}"),
        }
    }
}

#[tokio::test]
async fn on_localstack_a_capped_engine_receives_no_faster_than_the_cap() {
    let client = support::client().await;
    let queue = support::unique("capped");
    let url = support::create_queue(&client, &queue, 30).await;
    let bodies: Vec<String> = (0..200).map(|n| format!("m{n}")).collect();
    support::send(&client, &url, &bodies).await;
    let engine = support::builder(&queue)
        .await
        .max_receive_rate(10.0)
        .build()
        .expect("engine");
    let stats = engine.stats();
    let begun = Instant::now();
    let running = support::spawn_engine(engine, |_message: Message| async { Outcome::Ack });
    let mut last = 0;
    while begun.elapsed() < Duration::from_secs(4) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let received = stats.snapshot().messages_received;
        let cap = (10.0 * begun.elapsed().as_secs_f64()).ceil() as u64 + 10;
        assert!(
            received <= cap,
            "{received} received in {:?}, over 10 a second and one batch",
            begun.elapsed()
        );
        last = received;
    }
    assert!(last > 0, "receiving went on under the cap");
    running.shutdown().await;
    support::delete_queue(&client, &url).await;
}
