//! Access to the engine's internal state machines for the benches in `benches/`. Not part of
//! the API: hidden, behind the `bench` feature, and free to change in any release.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::heartbeat::{HeartbeatConfig, Schedule};
use crate::metrics::{QueueMetrics, StatsCells};
use crate::outcome::Outcome;
use crate::settle::coalescer::{Coalescer, CoalescerConfig, Entry, FlushReason, Lane};

/// The settlement coalescer, with `u64` tokens.
#[derive(Debug)]
pub struct CoalescerBench(Coalescer<u64>);

impl CoalescerBench {
    /// A coalescer with full batches of ten, `max_wait` and `max_in_flight` calls per lane.
    pub fn new(max_wait: Duration, max_in_flight: usize) -> Self {
        Self(Coalescer::new(CoalescerConfig {
            max_batch: 10,
            max_wait,
            max_in_flight,
        }))
    }

    /// Pushes a delete (or, with `visibility`, a visibility change) for `receipt`.
    pub fn push(&mut self, receipt: Arc<str>, visibility: bool, now: Instant, token: u64) -> bool {
        let lane = if visibility {
            Lane::Visibility
        } else {
            Lane::Delete
        };
        self.0.push(
            lane,
            Entry {
                receipt,
                visibility: None,
                enqueued_at: now,
                token,
            },
        )
    }

    /// Takes every batch due at `now`, finishes its call at once, and returns the entries
    /// taken.
    pub fn flush(&mut self, now: Instant) -> usize {
        let mut taken = 0;
        while let Some(batch) = self.0.poll_batch(now) {
            taken += batch.entries.len();
            self.0
                .finish(batch.lane, batch.entries.iter().map(|e| &e.receipt));
        }
        taken
    }
}

/// The heartbeat schedule.
#[derive(Debug)]
pub struct ScheduleBench(Schedule);

impl ScheduleBench {
    /// A schedule for a visibility timeout.
    pub fn new(visibility: Duration) -> Self {
        Self(Schedule::new(
            HeartbeatConfig::for_visibility(visibility, None)
                .unwrap_or_else(|| panic!("a visibility of at least 2 s: {visibility:?}")),
        ))
    }

    /// Tracks a delivery received at `received`; returns its key.
    pub fn register(&mut self, receipt: Arc<str>, received: Instant, visibility: Duration) -> u64 {
        self.0
            .register(
                Arc::clone(&receipt),
                receipt,
                received + visibility,
                received + crate::MAX_VISIBILITY,
            )
            .0
    }

    /// Stops tracking a delivery.
    pub fn deregister(&mut self, key: u64) {
        self.0.deregister(key);
    }

    /// Takes the extensions due at `now` and applies each at once; returns how many.
    pub fn extend_due(&mut self, now: Instant, seconds: u32) -> usize {
        let due = self.0.poll_due(now);
        for extension in &due {
            self.0.extended(extension.key, now, seconds, false);
        }
        self.0.arm();
        due.len()
    }
}

/// The per-message metrics path of one queue.
pub struct MetricsBench(QueueMetrics);

impl std::fmt::Debug for MetricsBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsBench")
    }
}

impl MetricsBench {
    /// Registers a queue's handles with the recorder installed now (if any).
    pub fn new(queue: &str) -> Self {
        Self(QueueMetrics::new(queue, Arc::new(StatsCells::default())))
    }

    /// Everything the engine records for one acked message, a tenth of its receive and of its
    /// delete batch included.
    pub fn one_message(&self, index: u64) {
        let m = &self.0;
        if index.is_multiple_of(10) {
            m.call(crate::metrics::Action::ReceiveMessage, true);
            m.received(10);
            m.prefetched(10.0);
        }
        m.delivered(1, false);
        m.in_flight(1.0);
        m.prefetched(-1.0);
        m.handler_started();
        m.handler_ended(0.001);
        m.in_flight(-1.0);
        m.settled(&Outcome::Ack, true, Lane::Delete, 0.002);
        if index % 10 == 9 {
            m.flushed(Lane::Delete, FlushReason::Full, 10);
            m.call(crate::metrics::Action::DeleteMessageBatch, true);
        }
    }
}
