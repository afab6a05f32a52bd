//! The send coalescer: publishes in, `SendMessageBatch` calls out.
//!
//! A pure state machine, like the settlement coalescer: no I/O, no clock of its own (the caller
//! passes `now`). One per destination. A batch goes out:
//! - when ten entries are waiting, or their bodies reach the byte budget of a call;
//! - at once when no call is in flight for the destination, so a lone publish takes one round
//!   trip;
//! - when the oldest entry has waited `max_wait`;
//! - at once while draining for shutdown.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// The most entries SQS takes in one `SendMessageBatch`.
pub(crate) const MAX_ENTRIES: usize = 10;

/// The send coalescer's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatcherConfig {
    /// How long the oldest entry may wait while a call is in flight.
    pub(crate) max_wait: Duration,
    /// The bytes of a call's entries beyond which no entry is added (a larger entry goes
    /// alone).
    pub(crate) max_bytes: usize,
    /// Calls in flight at once.
    pub(crate) max_in_flight: usize,
}

struct Waiting<T> {
    item: T,
    bytes: usize,
    since: Instant,
}

/// The waiting entries of one destination.
pub(crate) struct Batcher<T> {
    config: BatcherConfig,
    pending: VecDeque<Waiting<T>>,
    pending_bytes: usize,
    in_flight: usize,
    draining: bool,
}

impl<T> Batcher<T> {
    pub(crate) fn new(config: BatcherConfig) -> Self {
        Self {
            config: BatcherConfig {
                max_in_flight: config.max_in_flight.max(1),
                ..config
            },
            pending: VecDeque::new(),
            pending_bytes: 0,
            in_flight: 0,
            draining: false,
        }
    }

    /// Adds an entry of `bytes`. Returns whether the driver must look now: a batch is due, or
    /// the flush deadline moved. Refuses the entry (handing it back) once draining.
    pub(crate) fn push(&mut self, item: T, bytes: usize, now: Instant) -> Result<bool, T> {
        if self.draining {
            return Err(item);
        }
        let was_empty = self.pending.is_empty();
        self.pending.push_back(Waiting {
            item,
            bytes,
            since: now,
        });
        self.pending_bytes += bytes;
        Ok(self.in_flight < self.config.max_in_flight
            && (was_empty || self.in_flight == 0 || self.is_full()))
    }

    fn is_full(&self) -> bool {
        self.pending.len() >= MAX_ENTRIES || self.pending_bytes >= self.config.max_bytes
    }

    /// The next batch due at `now`, if any. Call it until it answers `None`; each batch is a
    /// call in flight until [`finish`](Self::finish).
    pub(crate) fn poll_batch(&mut self, now: Instant) -> Option<Vec<T>> {
        if self.in_flight >= self.config.max_in_flight {
            return None;
        }
        let oldest = self.pending.front()?;
        let due = self.draining
            || self.in_flight == 0
            || self.is_full()
            || now >= oldest.since + self.config.max_wait;
        if !due {
            return None;
        }
        let mut batch = Vec::new();
        let mut bytes = 0;
        while let Some(next) = self.pending.front() {
            if batch.len() == MAX_ENTRIES
                || (!batch.is_empty() && bytes + next.bytes > self.config.max_bytes)
            {
                break;
            }
            let Some(next) = self.pending.pop_front() else {
                break;
            };
            bytes += next.bytes;
            self.pending_bytes -= next.bytes;
            batch.push(next.item);
        }
        self.in_flight += 1;
        Some(batch)
    }

    /// A call of a batch ended.
    pub(crate) fn finish(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// When the next batch falls due without another push or finish, if ever.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        if self.in_flight >= self.config.max_in_flight {
            return None;
        }
        self.pending
            .front()
            .map(|oldest| oldest.since + self.config.max_wait)
    }

    /// Refuses new entries, and sends what waits at once.
    pub(crate) fn drain(&mut self) {
        self.draining = true;
    }

    /// Draining, with nothing waiting and nothing in flight.
    pub(crate) fn is_done(&self) -> bool {
        self.draining && self.pending.is_empty() && self.in_flight == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batcher() -> Batcher<u32> {
        Batcher::new(BatcherConfig {
            max_wait: Duration::from_millis(5),
            max_bytes: 100,
            max_in_flight: 2,
        })
    }

    #[test]
    fn a_lone_entry_goes_at_once_when_no_call_is_in_flight() {
        let now = Instant::now();
        let mut b = batcher();
        assert_eq!(b.push(1, 1, now), Ok(true));
        assert_eq!(b.poll_batch(now), Some(vec![1]));
        assert_eq!(b.poll_batch(now), None);
    }

    #[test]
    fn entries_wait_for_company_while_a_call_is_in_flight() {
        let now = Instant::now();
        let mut b = batcher();
        b.push(1, 1, now).expect("open");
        assert!(b.poll_batch(now).is_some());
        b.push(2, 1, now).expect("open");
        b.push(3, 1, now).expect("open");
        assert_eq!(b.poll_batch(now), None, "not due yet");
        assert_eq!(b.next_deadline(), Some(now + Duration::from_millis(5)));
        let later = now + Duration::from_millis(5);
        assert_eq!(b.poll_batch(later), Some(vec![2, 3]));
    }

    #[test]
    fn ten_waiting_entries_go_out_without_waiting() {
        let now = Instant::now();
        let mut b = batcher();
        b.push(0, 1, now).expect("open");
        assert!(b.poll_batch(now).is_some());
        for i in 1..=11 {
            b.push(i, 1, now).expect("open");
        }
        assert_eq!(b.poll_batch(now), Some((1..=10).collect()));
        // Two calls in flight: the eleventh waits for one to finish.
        assert_eq!(b.poll_batch(now + Duration::from_secs(1)), None);
        b.finish();
        assert_eq!(b.poll_batch(now + Duration::from_secs(1)), Some(vec![11]));
    }

    #[test]
    fn a_batch_stays_within_the_byte_budget() {
        let now = Instant::now();
        let mut b = batcher();
        b.push(1, 60, now).expect("open");
        b.push(2, 60, now).expect("open");
        b.push(3, 200, now).expect("open");
        assert_eq!(b.poll_batch(now), Some(vec![1]));
        assert_eq!(b.poll_batch(now), Some(vec![2]), "over budget: full");
        b.finish();
        assert_eq!(b.poll_batch(now), Some(vec![3]), "too large: alone");
    }

    #[test]
    fn draining_sends_everything_and_refuses_more() {
        let now = Instant::now();
        let mut b = batcher();
        b.push(1, 1, now).expect("open");
        assert!(b.poll_batch(now).is_some());
        b.push(2, 1, now).expect("open");
        b.drain();
        assert_eq!(b.push(3, 1, now), Err(3));
        assert_eq!(b.poll_batch(now), Some(vec![2]));
        assert!(!b.is_done());
        b.finish();
        b.finish();
        assert!(b.is_done());
    }
}
