//! The JSON status line `ledger-consumer` prints on stdout, and the peak of messages held it
//! (and the soak) reports.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqs_engine::StatsHandle;
use tokio::task::JoinHandle;

/// Which kind of status line it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Printed every 100 ms while the engine runs.
    Status,
    /// Printed once, after the engine stopped.
    Final,
}

/// One line of `ledger-consumer`'s output: what the engine holds and has done, and the
/// process's memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// A periodic line or the final one.
    pub kind: Kind,
    /// Milliseconds since the process started.
    pub elapsed_ms: u64,
    /// Messages the engine holds now (`Stats::in_flight`): received and not yet settled.
    pub in_flight: u64,
    /// The most messages held at once so far, sampled every millisecond.
    pub peak_in_flight: u64,
    /// Messages received so far.
    pub messages_received: u64,
    /// Ack settlements SQS answered with success.
    pub acked: u64,
    /// Ack settlements SQS answered with an error.
    pub ack_failed: u64,
    /// Messages the handler processed (lines written to the ledger).
    pub processed: u64,
    /// Outcomes the handler returned that SQS has not answered yet: processed minus acks
    /// answered (either way).
    pub settlements_pending: u64,
    /// SQS calls that failed and were retried (every action).
    pub calls_failed: u64,
    /// SQS calls made, failed ones included.
    pub calls: u64,
    /// Deliveries dropped without an outcome (handlers dropped at the shutdown timeout).
    pub unsettled: u64,
    /// Resident set size now, KiB.
    pub rss_kib: u64,
    /// Peak resident set size so far (VmHWM), KiB.
    pub peak_rss_kib: u64,
    /// Milliseconds from the shutdown signal to the engine's return (final line only).
    pub shutdown_ms: Option<u64>,
}

impl Status {
    /// Parses one line of output; `None` for anything that is not a status line.
    pub fn parse(line: &str) -> Option<Self> {
        serde_json::from_str(line.trim()).ok()
    }

    /// The line as printed.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The most messages the engine of `stats` has held at once, sampled every millisecond by the
/// task returned, which runs until it is aborted.
pub fn sample_peak_in_flight(stats: &StatsHandle) -> (Arc<AtomicU64>, JoinHandle<()>) {
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stats, peak) = (stats.clone(), Arc::clone(&peak));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                peak.fetch_max(stats.snapshot().in_flight, Ordering::Relaxed);
            }
        })
    };
    (peak, sampler)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_line_parses_back() {
        let status = Status {
            kind: Kind::Final,
            elapsed_ms: 1,
            in_flight: 2,
            peak_in_flight: 3,
            messages_received: 4,
            acked: 5,
            ack_failed: 6,
            processed: 7,
            settlements_pending: 8,
            calls_failed: 9,
            calls: 10,
            unsettled: 11,
            rss_kib: 12,
            peak_rss_kib: 13,
            shutdown_ms: Some(14),
        };
        assert_eq!(Status::parse(&status.to_line()), Some(status));
        assert_eq!(Status::parse("a log line"), None);
    }
}
