//! A `metrics` recorder for the sqs-engine child: it counts the engine's successful `ack` and
//! `drop` settlements (`sqs_engine_settlements_total`) as finished messages in the probe, feeds
//! the engine's settlement latency histogram (`sqs_engine_settlement_latency_seconds`, every
//! action) into the probe's settlement latencies, and ignores every other metric.
//!
//! Both happen inline, where the engine records them, as the other systems record theirs: no
//! task polls the engine's counters.

use std::sync::Arc;
use std::time::Duration;

use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};

use super::probe::Probe;

/// The engine's settlement latency histogram.
const SETTLEMENT_LATENCY: &str = "sqs_engine_settlement_latency_seconds";
/// The engine's settlements counter, by `outcome` and `result`.
const SETTLEMENTS: &str = "sqs_engine_settlements_total";

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
    }
}

/// The counter handle of successful `ack` or `drop` settlements: each is a finished message.
/// The engine counts a settlement before it records its latency.
#[derive(Debug)]
struct FinishedCounter(Arc<Probe>);

impl CounterFn for FinishedCounter {
    fn increment(&self, value: u64) {
        self.0.finished(value);
    }

    fn absolute(&self, _value: u64) {}
}

/// Whether `key` is the settlements counter of a message that is finished: `ack` or `drop`,
/// answered `ok`.
fn counts_finished(key: &Key) -> bool {
    if key.name() != SETTLEMENTS {
        return false;
    }
    let label = |name: &str| {
        key.labels()
            .find(|label| label.key() == name)
            .map(|label| label.value().to_owned())
    };
    matches!(label("outcome").as_deref(), Some("ack" | "drop"))
        && label("result").as_deref() == Some("ok")
}

impl Recorder for SettlementRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        if counts_finished(key) {
            Counter::from_arc(Arc::new(FinishedCounter(Arc::clone(&self.probe))))
        } else {
            Counter::noop()
        }
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

    #[test]
    fn only_successful_acks_and_drops_finish_messages() {
        let probe = Arc::new(Probe::new(100));
        let recorder = SettlementRecorder::new(Arc::clone(&probe));
        metrics::with_local_recorder(&recorder, || {
            let counter = |outcome: &'static str, result: &'static str| metrics::counter!(SETTLEMENTS, "queue" => "q", "outcome" => outcome, "result" => result);
            counter("ack", "ok").increment(3);
            counter("drop", "ok").increment(2);
            counter("ack", "error").increment(5);
            counter("retry", "ok").increment(7);
            counter("retry_after", "ok").increment(11);
            metrics::counter!("sqs_engine_calls_total", "outcome" => "ack", "result" => "ok")
                .increment(13);
        });
        assert_eq!(probe.finished_count(), 5);
    }
}
