//! The receive-to-handler path, in process: from a received batch of ten to each handler's
//! invocation and its settlement queued in the coalescer, as `Engine::run` starts them. No
//! network and no flusher: the settlement batches are taken as due and finished at once.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sqs_engine::bench::DispatchBench;
use sqs_engine::{Message, Outcome, ReceivedMessage};

/// Messages per receive batch.
const BATCH: usize = 10;
/// Batches made ahead and dispatched in one timed run.
const CHUNK: u64 = 200;

/// A receive batch as SQS answers one: bodies of 200 bytes and the system attributes a
/// receive of `All` brings.
fn received_batch(round: u64) -> Vec<ReceivedMessage> {
    (0..BATCH as u64)
        .map(|i| {
            let n = round * BATCH as u64 + i;
            let attributes: HashMap<String, String> = [
                ("ApproximateReceiveCount", "1".to_owned()),
                ("SentTimestamp", "1700000000000".to_owned()),
                (
                    "ApproximateFirstReceiveTimestamp",
                    "1700000000001".to_owned(),
                ),
                ("SenderId", "AIDAEXAMPLE".to_owned()),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
            ReceivedMessage {
                message_id: format!("{n:08x}-0000-4000-8000-000000000000"),
                receipt_handle: format!("{n:0>180}"),
                body: "x".repeat(200),
                attributes,
                message_attributes: HashMap::new(),
            }
        })
        .collect()
}

fn dispatch(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("a tokio runtime: {error}"));
    let handler = Arc::new(|message: Message| async move {
        black_box(message.body().len());
        Outcome::Ack
    });
    let mut group = c.benchmark_group("receive_to_handler");
    group.throughput(Throughput::Elements(BATCH as u64));
    for heartbeat in [true, false] {
        let bench = Arc::new(runtime.block_on(DispatchBench::new(heartbeat)));
        let name = if heartbeat {
            "batch_of_10_heartbeat_on"
        } else {
            "batch_of_10_heartbeat_off"
        };
        let mut round = 0;
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    // The batches are made outside the timing, a chunk at a time; the chunk is
                    // dispatched on a task of the runtime, as the engine's dispatch runs.
                    let chunk = left.min(CHUNK);
                    left -= chunk;
                    let batches: Vec<_> = (0..chunk)
                        .map(|_| {
                            round += 1;
                            received_batch(round)
                        })
                        .collect();
                    let bench = Arc::clone(&bench);
                    let handler = Arc::clone(&handler);
                    elapsed += runtime
                        .block_on(runtime.spawn(async move {
                            let started = Instant::now();
                            for batch in batches {
                                black_box(bench.dispatch(&handler, batch).await);
                            }
                            started.elapsed()
                        }))
                        .unwrap_or_else(|error| panic!("the bench task: {error}"));
                }
                elapsed
            });
        });
    }
    group.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
