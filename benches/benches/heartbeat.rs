//! The heartbeat schedule: tracking deliveries and extending those that fall due.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use sqs_engine::bench::ScheduleBench;
use tokio::time::Instant;

const DELIVERIES: u64 = 10_000;
const VISIBILITY: Duration = Duration::from_secs(30);

fn receipts() -> Vec<Arc<str>> {
    (0..DELIVERIES)
        .map(|i| Arc::from(format!("receipt-handle-{i:0>180}")))
        .collect()
}

fn heartbeat(c: &mut Criterion) {
    let receipts = receipts();
    let mut group = c.benchmark_group("heartbeat");
    group.throughput(Throughput::Elements(DELIVERIES));

    // Every message settles before its first extension: register, then deregister.
    group.bench_function("register_and_settle", |b| {
        b.iter_batched(
            || ScheduleBench::new(VISIBILITY),
            |mut schedule| {
                let now = Instant::now();
                let keys: Vec<u64> = receipts
                    .iter()
                    .map(|r| schedule.register(Arc::clone(r), now, VISIBILITY))
                    .collect();
                for key in keys {
                    schedule.deregister(key);
                }
                black_box(schedule)
            },
            BatchSize::SmallInput,
        );
    });

    // Slow handlers: every delivery falls due and is extended, deliveries received a
    // millisecond apart.
    group.bench_function("extend_all_due", |b| {
        b.iter_batched(
            || {
                let mut schedule = ScheduleBench::new(VISIBILITY);
                let start = Instant::now();
                for (i, receipt) in receipts.iter().enumerate() {
                    schedule.register(
                        Arc::clone(receipt),
                        start + Duration::from_millis(i as u64),
                        VISIBILITY,
                    );
                }
                (schedule, start)
            },
            |(mut schedule, start)| {
                let mut extended = 0;
                let mut now = start + VISIBILITY - Duration::from_secs(6);
                while extended < DELIVERIES as usize {
                    extended += schedule.extend_due(now, 30);
                    now += Duration::from_secs(1);
                }
                black_box(extended)
            },
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

criterion_group!(benches, heartbeat);
criterion_main!(benches);
