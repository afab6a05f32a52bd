//! End to end against the load test's embedded, in-memory SQS server (`loadtest::server`), in
//! this process: each iteration fills a queue with `MESSAGES` messages (not timed), then times
//! `Engine::run` acking every one of them, from its start until it returned, every
//! settlement answered by the server.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loadtest::server::EmbeddedSqs;
use sqs_engine::{Engine, Message, Outcome};
use tokio_util::sync::CancellationToken;

/// Messages consumed per iteration.
const MESSAGES: u64 = 2_000;

/// Fills `queue_url` with `MESSAGES` bodies of 200 bytes, ten per `SendMessageBatch`.
async fn fill(client: &Client, queue_url: &str) {
    for batch in 0..MESSAGES / 10 {
        let entries = (0..10)
            .map(|i| {
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(format!("{:0>200}", batch * 10 + i))
                    .build()
                    .unwrap_or_else(|error| panic!("a batch entry: {error}"))
            })
            .collect::<Vec<_>>();
        client
            .send_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .unwrap_or_else(|error| panic!("SendMessageBatch: {error}"));
    }
}

/// Consumes `MESSAGES` messages with the engine, acking each; returns how long it ran.
async fn consume(config: &aws_config::SdkConfig, queue_url: &str) -> Duration {
    let handled = Arc::new(AtomicU64::new(0));
    let done = CancellationToken::new();
    let engine = Engine::builder()
        .sdk_config(config)
        .queue(queue_url)
        // The queue is empty once the last message is received: no long poll to wait out.
        .wait_time(Duration::ZERO)
        .build()
        .unwrap_or_else(|error| panic!("the engine: {error}"));
    let handler = {
        let handled = Arc::clone(&handled);
        let done = done.clone();
        move |_message: Message| {
            if handled.fetch_add(1, Ordering::Relaxed) + 1 == MESSAGES {
                done.cancel();
            }
            async { Outcome::Ack }
        }
    };
    let started = Instant::now();
    let stats = engine
        .run(handler, async move { done.cancelled().await })
        .await
        .unwrap_or_else(|error| panic!("the engine ran: {error}"));
    let elapsed = started.elapsed();
    assert_eq!(stats.acked.ok, MESSAGES, "every message acked: {stats:?}");
    elapsed
}

fn end_to_end(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("a tokio runtime: {error}"));
    let server = EmbeddedSqs::start(([127, 0, 0, 1], 0).into())
        .unwrap_or_else(|error| panic!("the embedded server: {error}"));
    let config = runtime.block_on(
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(server.endpoint())
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_credential_types::Credentials::new(
                "bench", "bench", None, None, "bench",
            ))
            .load(),
    );
    let client = Client::new(&config);
    let queue_url = runtime
        .block_on(client.create_queue().queue_name("bench").send())
        .unwrap_or_else(|error| panic!("CreateQueue: {error}"))
        .queue_url
        .unwrap_or_else(|| panic!("CreateQueue answered a URL"));

    let mut group = c.benchmark_group("end_to_end_embedded");
    group.throughput(Throughput::Elements(MESSAGES));
    group.sample_size(10);
    group.bench_function("consume_2000_ack", |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            for _ in 0..iters {
                runtime.block_on(fill(&client, &queue_url));
                elapsed += runtime.block_on(consume(&config, &queue_url));
            }
            elapsed
        });
    });
    group.finish();
    runtime
        .block_on(server.shutdown())
        .unwrap_or_else(|error| panic!("the server stopped: {error}"));
}

criterion_group!(benches, end_to_end);
criterion_main!(benches);
