//! Slow deletes: when `DeleteMessageBatch` is slower than `ReceiveMessage`, what waits for SQS.
//!
//! A delivery keeps its place among the messages the engine may hold (`max_held`) until SQS
//! answered its settlement, and the receivers wait while more settlements wait to be sent
//! than the calls allowed in flight carry. With deletes that take a second (a slow or
//! throttled `DeleteMessageBatch`), receiving slows to the pace of the deletes: the acks
//! waiting to go out stay bounded, and so does `Stats::in_flight`. Each of those messages is
//! still on the queue until its delete is answered: a crash redelivers them.
//!
//! Run against LocalStack: `cargo run -p sqs-engine-reliability --example slow_deletes`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sqs_engine::{AwsSqs, Engine, SqsApi};
use sqs_engine_reliability::memory;
use sqs_engine_test_support::{self as sqs, Answered};

/// `inner`, with each delete answered `delay` late.
fn slow_deletes(inner: AwsSqs, delay: Duration) -> Answered<AwsSqs> {
    Answered::new(inner).deletes(move |inner, queue_url, receipt_handles| {
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            inner.delete_message_batch(queue_url, receipt_handles).await
        })
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let endpoint = sqs::endpoint();
    let client = sqs::client_at(&endpoint).await;
    let name = sqs::unique("probe-slow-deletes");
    let url = sqs::create_queue(&client, &name, 30).await;
    let bodies: Vec<String> = (0..20_000).map(|i| format!("p-{i}")).collect();
    sqs::send_ids(&client, &url, &bodies, 16).await;
    let api = slow_deletes(
        AwsSqs::from_sdk_config(&sqs::sdk_config_at(&endpoint).await),
        Duration::from_millis(1000),
    );
    let engine = Engine::builder()
        .api(api)
        .queue(name)
        .workers(8)
        .prefetch(8)
        .receivers(2)
        .wait_time(Duration::from_secs(1))
        .build()?;
    let stats = engine.stats();
    let handled = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(engine.run(sqs::counting_acks(&handled), async move {
        let _ = rx.await;
    }));
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let s = stats.snapshot();
        let handled = handled.load(Ordering::Relaxed) as u64;
        println!(
            "{:>4.1}s held {:>3} (cap 16) handled {:>6} acks answered {:>6} pending {:>6} rss {:.1} MiB",
            start.elapsed().as_secs_f64(),
            s.in_flight,
            handled,
            s.acked.total(),
            handled - s.acked.total(),
            memory::mib(memory::own().rss_kib)
        );
    }
    let _ = tx.send(());
    let s = task.await??;
    println!("final: acked {} late {}", s.acked.ok, s.late_settlements);
    sqs::delete_queue(&client, &url).await;
    Ok(())
}
