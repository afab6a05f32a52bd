//! The settlement coalescer: the cost per entry of pushing settlements and taking batches.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use sqs_engine::bench::CoalescerBench;
use tokio::time::Instant;

const ENTRIES: u64 = 10_000;

fn receipts() -> Vec<Arc<str>> {
    (0..ENTRIES)
        .map(|i| Arc::from(format!("receipt-handle-{i:0>180}")))
        .collect()
}

/// Pushes every receipt onto `coalescer` (the visibility lane's, or the delete lane's) at one
/// instant, taking the batches due after every `flush_every` pushes; returns the entries
/// taken.
fn push_all(
    mut coalescer: CoalescerBench,
    receipts: &[Arc<str>],
    visibility: bool,
    flush_every: usize,
) -> usize {
    let now = Instant::now();
    let mut taken = 0;
    for (i, receipt) in receipts.iter().enumerate() {
        coalescer.push(Arc::clone(receipt), visibility, now, i as u64);
        if i % flush_every == flush_every - 1 {
            taken += coalescer.flush(now);
        }
    }
    taken
}

fn coalescer(c: &mut Criterion) {
    let receipts = receipts();
    let mut group = c.benchmark_group("coalescer");
    group.throughput(Throughput::Elements(ENTRIES));
    let cases = [
        // Under load: every push may fill a batch, taken at once.
        ("push_and_flush_full_batches", false, 10),
        // Idle: each entry goes out alone as soon as it is pushed.
        ("push_and_flush_one_by_one", false, 1),
        // The visibility lane keeps each receipt handle in one call at a time.
        ("visibility_lane_full_batches", true, 10),
    ];
    for (name, visibility, flush_every) in cases {
        group.bench_function(name, |b| {
            b.iter_batched(
                || CoalescerBench::new(Duration::from_millis(5), 16),
                |coalescer| black_box(push_all(coalescer, &receipts, visibility, flush_every)),
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, coalescer);
criterion_main!(benches);
