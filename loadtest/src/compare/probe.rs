//! What a system measures about itself in its child process: messages finished, deliveries,
//! latencies, the throughput timeline, and the moment the last message was settled.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::fill::now_micros;

/// The longest latency a histogram holds, in microseconds (ten minutes); longer ones are
/// recorded as this.
const MAX_MICROS: u64 = 600_000_000;

/// Latency percentiles, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Percentiles {
    /// Observations.
    pub(crate) count: u64,
    /// Median.
    pub(crate) p50_ms: f64,
    /// 99th percentile.
    pub(crate) p99_ms: f64,
    /// Largest.
    pub(crate) max_ms: f64,
}

/// A latency histogram, in microseconds, shared between tasks.
#[derive(Debug)]
pub(crate) struct Latencies(Mutex<Histogram<u64>>);

impl Latencies {
    /// An empty histogram: 1 µs to ten minutes, three significant digits.
    pub(crate) fn new() -> Self {
        let histogram = Histogram::new_with_bounds(1, MAX_MICROS, 3)
            .expect("1 µs..=10 min at 3 significant digits are valid histogram bounds");
        Self(Mutex::new(histogram))
    }

    /// Records one latency.
    pub(crate) fn record(&self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros())
            .unwrap_or(MAX_MICROS)
            .clamp(1, MAX_MICROS);
        if let Ok(mut histogram) = self.0.lock() {
            histogram.saturating_record(micros);
        }
    }

    /// The percentiles so far; `None` when nothing was recorded.
    pub(crate) fn percentiles(&self) -> Option<Percentiles> {
        let histogram = self.0.lock().ok()?;
        if histogram.is_empty() {
            return None;
        }
        let ms = |micros: u64| micros as f64 / 1000.0;
        Some(Percentiles {
            count: histogram.len(),
            p50_ms: ms(histogram.value_at_quantile(0.5)),
            p99_ms: ms(histogram.value_at_quantile(0.99)),
            max_ms: ms(histogram.max()),
        })
    }
}

/// The order a FIFO scenario's handlers kept: each handler reports its message's group and
/// number in the group (from the body) when it starts and when it ends. A violation is a
/// message started while another of its group was running, or a message acked after a later
/// one of its group was.
#[derive(Debug, Default)]
pub(crate) struct OrderCheck {
    /// By group: handlers running, and the highest number acked.
    groups: Mutex<HashMap<u64, (u32, Option<u64>)>>,
    /// Violations so far.
    violations: AtomicU64,
}

impl OrderCheck {
    /// A handler starts on message `seq` of `group`.
    pub(crate) fn started(&self, group: u64, _seq: u64) {
        let Ok(mut groups) = self.groups.lock() else {
            return;
        };
        let (running, _) = groups.entry(group).or_default();
        if *running > 0 {
            self.violations.fetch_add(1, Ordering::Relaxed);
        }
        *running += 1;
    }

    /// The handler of message `seq` of `group` returned; `acked` when its outcome was an ack
    /// or a drop.
    pub(crate) fn ended(&self, group: u64, seq: u64, acked: bool) {
        let Ok(mut groups) = self.groups.lock() else {
            return;
        };
        let (running, last) = groups.entry(group).or_default();
        *running = running.saturating_sub(1);
        if acked {
            if last.is_some_and(|last| seq < last) {
                self.violations.fetch_add(1, Ordering::Relaxed);
            }
            *last = Some(last.map_or(seq, |last| last.max(seq)));
        }
    }

    /// Violations so far.
    pub(crate) fn violations(&self) -> u64 {
        self.violations.load(Ordering::Relaxed)
    }
}

/// The measurements of one system's run, shared by its tasks.
#[derive(Debug)]
pub(crate) struct Probe {
    /// When the system was started.
    pub(crate) start: Instant,
    /// Messages to finish.
    pub(crate) target: u64,
    /// Messages finished (acked or dropped, and settled where the system shows it).
    finished: AtomicU64,
    /// Handler invocations started (deliveries handled).
    deliveries: AtomicU64,
    /// When the target was reached, in microseconds after `start`; 0 until then.
    end_micros: AtomicU64,
    /// Cancelled when the target is reached.
    pub(crate) done: CancellationToken,
    /// Given a permit at every finished message (the light-load sender waits on it).
    pub(crate) settled: Notify,
    /// Send time (from the body) to handler start.
    pub(crate) e2e: Latencies,
    /// Handler return to SQS's answer for its settlement.
    pub(crate) settlement: Latencies,
    /// One SQS call's round trip (the light-load sender's SendMessage).
    pub(crate) round_trip: Latencies,
    /// The order FIFO messages were handled in.
    pub(crate) order: OrderCheck,
}

impl Probe {
    /// A probe for a run that ends after `target` finished messages, started now.
    pub(crate) fn new(target: u64) -> Self {
        Self {
            start: Instant::now(),
            target,
            finished: AtomicU64::new(0),
            deliveries: AtomicU64::new(0),
            end_micros: AtomicU64::new(0),
            done: CancellationToken::new(),
            settled: Notify::new(),
            e2e: Latencies::new(),
            settlement: Latencies::new(),
            round_trip: Latencies::new(),
            order: OrderCheck::default(),
        }
    }

    /// A handler starts on a message sent at `sent_micros` (from its body).
    pub(crate) fn delivered(&self, sent_micros: Option<u64>) {
        self.deliveries.fetch_add(1, Ordering::Relaxed);
        if let Some(sent) = sent_micros {
            self.e2e
                .record(Duration::from_micros(now_micros().saturating_sub(sent)));
        }
    }

    /// `count` more messages are finished.
    pub(crate) fn finished(&self, count: u64) {
        if count == 0 {
            return;
        }
        let now = self.finished.fetch_add(count, Ordering::Relaxed) + count;
        self.after_finishing(now, count);
    }

    /// Signals the sender and, at the target, the end.
    fn after_finishing(&self, now: u64, added: u64) {
        for _ in 0..added.min(2) {
            self.settled.notify_one();
        }
        if now >= self.target && !self.done.is_cancelled() {
            let micros = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
            let _ = self.end_micros.compare_exchange(
                0,
                micros.max(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            self.done.cancel();
        }
    }

    /// Messages finished so far.
    pub(crate) fn finished_count(&self) -> u64 {
        self.finished.load(Ordering::Relaxed)
    }

    /// Deliveries handled so far.
    pub(crate) fn deliveries(&self) -> u64 {
        self.deliveries.load(Ordering::Relaxed)
    }

    /// Seconds from the start to the last finished message (or to now, when the target was
    /// not reached).
    pub(crate) fn elapsed_secs(&self) -> f64 {
        match self.end_micros.load(Ordering::Relaxed) {
            0 => self.start.elapsed().as_secs_f64(),
            micros => micros as f64 / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_ends_at_the_target_and_keeps_the_time_of_the_last_message() {
        let probe = Probe::new(3);
        probe.finished(2);
        assert!(!probe.done.is_cancelled());
        probe.finished(1);
        assert!(probe.done.is_cancelled());
        let end = probe.elapsed_secs();
        probe.finished(5);
        assert!((probe.elapsed_secs() - end).abs() < f64::EPSILON);
        assert_eq!(probe.finished_count(), 8);
    }

    #[test]
    fn overlapping_or_reordered_messages_of_a_group_are_violations() {
        let order = OrderCheck::default();
        order.started(1, 0);
        order.started(2, 0);
        order.ended(1, 0, true);
        order.started(1, 1);
        order.ended(1, 1, true);
        order.ended(2, 0, true);
        assert_eq!(order.violations(), 0);
        // Group 3: 1 starts while 0 runs, and 0 is acked after 1.
        order.started(3, 0);
        order.started(3, 1);
        order.ended(3, 1, true);
        order.ended(3, 0, true);
        assert_eq!(order.violations(), 2);
    }

    #[test]
    fn percentiles_come_from_what_was_recorded() {
        let latencies = Latencies::new();
        assert!(latencies.percentiles().is_none());
        for ms in 1..=100 {
            latencies.record(Duration::from_millis(ms));
        }
        let p = latencies.percentiles().unwrap_or_default();
        assert_eq!(p.count, 100);
        assert!((p.p50_ms - 50.0).abs() < 0.1, "{p:?}");
        assert!((p.p99_ms - 99.0).abs() < 0.1, "{p:?}");
        assert!((p.max_ms - 100.0).abs() < 0.1, "{p:?}");
    }
}
