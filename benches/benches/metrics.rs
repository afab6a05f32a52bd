//! The per-message cost of the engine's metrics: with no recorder installed, and with the
//! Prometheus recorder the `prometheus` feature installs.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use metrics_exporter_prometheus::PrometheusBuilder;
use sqs_engine::bench::MetricsBench;

fn metrics(c: &mut Criterion) {
    let mut group = c.benchmark_group("metrics_per_message");
    group.throughput(Throughput::Elements(1));

    let no_recorder = MetricsBench::new("bench");
    let mut i = 0u64;
    group.bench_function("no_recorder", |b| {
        b.iter(|| {
            no_recorder.one_message(black_box(i));
            i += 1;
        });
    });

    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let with_prometheus = metrics::with_local_recorder(&recorder, || MetricsBench::new("bench"));
    let mut i = 0u64;
    group.bench_function("prometheus_recorder", |b| {
        b.iter(|| {
            with_prometheus.one_message(black_box(i));
            i += 1;
        });
    });
    group.finish();
    // The recorder saw what was recorded.
    assert!(
        handle
            .render()
            .contains("sqs_engine_messages_received_total")
    );
}

criterion_group!(benches, metrics);
criterion_main!(benches);
