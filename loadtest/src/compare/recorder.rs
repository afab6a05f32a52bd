//! A `metrics` recorder for the sqs-engine child: it feeds the engine's settlement latency
//! histogram (`sqs_engine_settlement_latency_seconds`, every action) into the probe's
//! settlement latencies, wakes the probe's `settlement_seen` at each, and ignores every
//! other metric.

use std::sync::Arc;
use std::time::Duration;

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

use super::probe::Probe;

/// The engine's settlement latency histogram.
const SETTLEMENT_LATENCY: &str = "sqs_engine_settlement_latency_seconds";

/// The recorder: settlement latencies into a probe, nothing else.
#[derive(Debug)]
pub(crate) struct SettlementRecorder {
    /// Where the latencies go.
    probe: Arc<Probe>,
}

impl SettlementRecorder {
    /// A recorder feeding `probe`.
    pub(crate) fn new(probe: Arc<Probe>) -> Self {
        Self { probe }
    }
}

/// The histogram handle: each value, in seconds, is one settlement latency.
#[derive(Debug)]
struct SettlementHistogram(Arc<Probe>);

impl HistogramFn for SettlementHistogram {
    fn record(&self, value: f64) {
        if value.is_finite() && value >= 0.0 {
            self.0.settlement.record(Duration::from_secs_f64(value));
        }
        self.0.settlement_seen.notify_one();
    }
}

impl Recorder for SettlementRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        if key.name() == SETTLEMENT_LATENCY {
            Histogram::from_arc(Arc::new(SettlementHistogram(Arc::clone(&self.probe))))
        } else {
            Histogram::noop()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_settlement_latency_reaches_the_probe() {
        let probe = Arc::new(Probe::new(1));
        let recorder = SettlementRecorder::new(Arc::clone(&probe));
        metrics::with_local_recorder(&recorder, || {
            metrics::histogram!(SETTLEMENT_LATENCY, "action" => "DeleteMessageBatch").record(0.002);
            metrics::histogram!("sqs_engine_handler_duration_seconds").record(5.0);
        });
        let settled = probe.settlement.percentiles().unwrap_or_default();
        assert_eq!(settled.count, 1);
        assert!((settled.max_ms - 2.0).abs() < 0.01, "{settled:?}");
    }
}
