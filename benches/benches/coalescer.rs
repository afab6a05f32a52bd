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

fn coalescer(c: &mut Criterion) {
    let receipts = receipts();
    let mut group = c.benchmark_group("coalescer");
    group.throughput(Throughput::Elements(ENTRIES));

    // Under load: every push may fill a batch, taken at once.
    group.bench_function("push_and_flush_full_batches", |b| {
        b.iter_batched(
            || CoalescerBench::new(Duration::from_millis(5), 16),
            |mut coalescer| {
                let now = Instant::now();
                let mut taken = 0;
                for (i, receipt) in receipts.iter().enumerate() {
                    coalescer.push(Arc::clone(receipt), false, now, i as u64);
                    if i % 10 == 9 {
                        taken += coalescer.flush(now);
                    }
                }
                black_box(taken)
            },
            BatchSize::SmallInput,
        );
    });

    // Idle: each entry goes out alone as soon as it is pushed.
    group.bench_function("push_and_flush_one_by_one", |b| {
        b.iter_batched(
            || CoalescerBench::new(Duration::from_millis(5), 16),
            |mut coalescer| {
                let now = Instant::now();
                let mut taken = 0;
                for (i, receipt) in receipts.iter().enumerate() {
                    coalescer.push(Arc::clone(receipt), false, now, i as u64);
                    taken += coalescer.flush(now);
                }
                black_box(taken)
            },
            BatchSize::SmallInput,
        );
    });

    // The visibility lane keeps each receipt handle in one call at a time.
    group.bench_function("visibility_lane_full_batches", |b| {
        b.iter_batched(
            || CoalescerBench::new(Duration::from_millis(5), 16),
            |mut coalescer| {
                let now = Instant::now();
                let mut taken = 0;
                for (i, receipt) in receipts.iter().enumerate() {
                    coalescer.push(Arc::clone(receipt), true, now, i as u64);
                    if i % 10 == 9 {
                        taken += coalescer.flush(now);
                    }
                }
                black_box(taken)
            },
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

criterion_group!(benches, coalescer);
criterion_main!(benches);
