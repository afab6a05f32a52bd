//! The settlement coalescer: entries in, batch calls out.
//!
//! A pure state machine: two lines of the batching core ([`Batcher`]), one per action
//! (`DeleteMessageBatch`, `ChangeMessageVisibilityBatch`), under one limit of calls in flight
//! that follows the calls' round trip. The token `T` rides along with each entry so the
//! driver can hand each entry's answer back to whoever is waiting for it.
//!
//! A lane flushes a batch when it is full, at once when no call of its kind is in flight, when
//! its oldest entry has waited `max_wait`, and at once while draining (see [`crate::sqs::batch`]).
//! A delete lane whose batch the deliveries still out would fill waits for them (see
//! [`Coalescer::expect`]): idle, rather than flush at once, and busy, up to the patience given.
//! A batch never carries one receipt handle twice: a second entry for the same handle waits for
//! the next batch of its lane. On the visibility lane a receipt handle is also in at most one
//! call at a time, so that the visibility changes of one message (a heartbeat's extension, then
//! the handler's retry) reach SQS in the order they were made ([`DistinctReceipts`]).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::visibility::VisibilityTarget;
use crate::sqs::batch::{Admit, BatchConfig, Batcher, FlushReason, Queued, Rule};
use crate::sqs::lane::Lane;

/// One message's entry.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    /// The receipt handle of the delivery being settled.
    pub(crate) receipt: Arc<str>,
    /// The visibility asked for; `None` on the delete lane.
    pub(crate) visibility: Option<VisibilityTarget>,
    /// When the entry was pushed.
    pub(crate) enqueued_at: Instant,
    /// Whatever the driver needs to answer for the entry.
    pub(crate) token: T,
}

impl<T> Queued for Entry<T> {
    fn enqueued_at(&self) -> Instant {
        self.enqueued_at
    }
}

/// A batch ready to be sent.
#[derive(Debug)]
pub(crate) struct Batch<T> {
    pub(crate) lane: Lane,
    pub(crate) reason: FlushReason,
    pub(crate) entries: Vec<Entry<T>>,
}

/// The coalescer's settings: entries in a full batch (1..=10), how long the oldest entry may
/// wait while a call of its lane is in flight, and the most calls of one lane in flight at
/// once (see [`Coalescer::round_trip`]).
pub(crate) type CoalescerConfig = BatchConfig;

/// Batch calls in flight worth allowing per second of their round trip: enough for 15,000
/// calls a second of one lane (150,000 messages), above what one engine process settles, so
/// that settlement never holds the receivers back (docs/benchmarks.md has the measurements).
const CALLS_PER_ROUND_TRIP_SECOND: f64 = 15_000.0;

/// The fewest calls of a lane allowed in flight, whatever the round trip: a full batch
/// waiting for a slot is cheaper than a partial one sent early, but not by this many.
const MIN_CALLS_IN_FLIGHT: usize = 16;

/// The pending entries of one queue, and the rules that turn them into batches.
#[derive(Debug)]
pub(crate) struct Coalescer<T> {
    /// Calls of one lane in flight at once, at most, whatever the round trip.
    max_in_flight: usize,
    /// Calls of one lane allowed in flight now: what the round trip needs, within
    /// `max_in_flight`.
    allowed: usize,
    lanes: [Batcher<Entry<T>, DistinctReceipts>; 2],
}

impl<T> Coalescer<T> {
    pub(crate) fn new(config: CoalescerConfig) -> Self {
        let max_in_flight = config.max_in_flight.max(1);
        let allowed = MIN_CALLS_IN_FLIGHT.min(max_in_flight);
        let lane = |ordered| {
            Batcher::new(
                BatchConfig {
                    max_in_flight: allowed,
                    ..config
                },
                DistinctReceipts::new(ordered),
            )
        };
        Self {
            max_in_flight,
            allowed,
            lanes: [lane(false), lane(true)],
        }
    }

    /// `deliveries` are still out, their handlers yet to settle them: while they and the
    /// entries waiting would fill a delete batch, an idle delete lane waits for them instead of
    /// sending a partial batch at once, and the oldest entry waits up to `patience` (at least
    /// `max_wait`) whether a call is in flight or not. At moderate load the handlers' deletes
    /// then share full calls, at loopback and at a round trip of many milliseconds alike; a
    /// lone message (nothing else out) still goes at once.
    /// The visibility lane never waits so: its entries are retries and due extensions.
    pub(crate) fn expect(&mut self, deliveries: usize, patience: Duration) {
        self.lane(Lane::Delete).expect(deliveries, patience);
    }

    fn lane(&mut self, lane: Lane) -> &mut Batcher<Entry<T>, DistinctReceipts> {
        &mut self.lanes[lane.index()]
    }

    /// The batch calls take `rtt` to be answered: allow as many in flight as that round trip
    /// needs for [`CALLS_PER_ROUND_TRIP_SECOND`], at least [`MIN_CALLS_IN_FLIGHT`], at most
    /// the configured cap. On a short round trip, batches then wait for a slot and go out
    /// full; on a long one, enough of them are in flight. While the calls `queueing` at the
    /// server made the round trip long (a server short of CPU), the allowance does not grow:
    /// more calls in flight would only wait longer there, and the backlog they let through
    /// would hold more messages.
    pub(crate) fn round_trip(&mut self, rtt: Duration, queueing: bool) {
        let needed = (rtt.as_secs_f64() * CALLS_PER_ROUND_TRIP_SECOND).ceil() as usize;
        let needed = needed.max(MIN_CALLS_IN_FLIGHT).min(self.max_in_flight);
        self.allowed = if queueing {
            needed.min(self.allowed)
        } else {
            needed
        };
        for lane in &mut self.lanes {
            lane.set_max_in_flight(self.allowed);
        }
    }

    /// Calls of one lane allowed in flight now.
    #[cfg(test)]
    pub(crate) fn allowed(&self) -> usize {
        self.allowed
    }

    /// Adds an entry. Returns whether the driver must look at the coalescer now: a batch is
    /// ready, or the lane's flush deadline moved earlier.
    pub(crate) fn push(&mut self, lane: Lane, entry: Entry<T>) -> bool {
        self.lane(lane).push(entry)
    }

    /// The next batch that is due at `now`, if any. Call it until it answers `None`.
    pub(crate) fn poll_batch(&mut self, now: Instant) -> Option<Batch<T>> {
        Lane::ALL.into_iter().find_map(|lane| {
            let (reason, entries) = self.lane(lane).poll(now)?;
            Some(Batch {
                lane,
                reason,
                entries,
            })
        })
    }

    /// When the next batch falls due if nothing else happens: the earliest deadline of a lane
    /// with entries and room for a call. `None` when only a push or a finished call can make
    /// a batch due.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.lanes.iter().filter_map(Batcher::next_deadline).min()
    }

    /// A call of `lane` with these receipt handles has finished (whatever its answer).
    pub(crate) fn finish<'a>(
        &mut self,
        lane: Lane,
        receipts: impl IntoIterator<Item = &'a Arc<str>>,
    ) {
        let lane = self.lane(lane);
        lane.finish();
        lane.rule_mut().release(receipts);
    }

    /// Takes out the entries of `lane` still waiting (not in a call) for which `stale` holds.
    pub(crate) fn remove_pending(&mut self, lane: Lane, stale: impl FnMut(&Entry<T>) -> bool) {
        self.lane(lane).remove_pending(stale);
    }

    /// From now on every pending entry is due at once.
    pub(crate) fn drain(&mut self) {
        for lane in &mut self.lanes {
            lane.drain();
        }
    }

    /// Whether it is draining.
    pub(crate) fn is_draining(&self) -> bool {
        self.lanes[0].is_draining()
    }

    /// No entry pending and no call in flight.
    pub(crate) fn is_idle(&self) -> bool {
        self.lanes.iter().all(Batcher::is_idle)
    }

    /// Entries in a full batch.
    pub(crate) fn max_batch(&self) -> usize {
        self.lanes[0].max_batch()
    }

    /// Whether more entries wait, over both lanes, than the calls allowed in flight carry:
    /// settlement is behind, and receiving more would only make them wait longer.
    pub(crate) fn is_backlogged(&self) -> bool {
        let waiting: usize = self.lanes.iter().map(Batcher::pending).sum();
        waiting > self.allowed * self.max_batch()
    }

    /// Entries waiting on `lane`.
    pub(crate) fn pending(&self, lane: Lane) -> usize {
        self.lanes[lane.index()].pending()
    }

    /// Calls of `lane` in flight.
    #[cfg(test)]
    pub(crate) fn in_flight(&self, lane: Lane) -> usize {
        self.lanes[lane.index()].in_flight()
    }
}

/// The rule of a lane: a second entry for a receipt handle already in the batch waits for the
/// next one. On an ordered lane, an entry whose receipt handle is in a call in flight also
/// waits for that call to finish, so the entries of one message reach SQS in the order they
/// came.
#[derive(Debug)]
struct DistinctReceipts {
    /// The receipt handles in calls in flight, on an ordered lane.
    busy: Option<HashSet<Arc<str>>>,
}

impl DistinctReceipts {
    /// The rule of an ordered lane, or of one that only keeps each batch's handles distinct.
    fn new(ordered: bool) -> Self {
        Self {
            busy: ordered.then(HashSet::new),
        }
    }

    fn is_busy(&self, receipt: &Arc<str>) -> bool {
        self.busy
            .as_ref()
            .is_some_and(|busy| !busy.is_empty() && busy.contains(receipt))
    }

    /// A call with these receipt handles has finished (whatever its answer).
    fn release<'a>(&mut self, receipts: impl IntoIterator<Item = &'a Arc<str>>) {
        if let Some(busy) = &mut self.busy {
            for receipt in receipts {
                busy.remove(receipt);
            }
        }
    }
}

impl<T> Rule<Entry<T>> for DistinctReceipts {
    fn admits(&self, batch: &[Entry<T>], entry: &Entry<T>) -> Admit {
        let receipt = &entry.receipt;
        if self.is_busy(receipt) || batch.iter().any(|taken| taken.receipt == *receipt) {
            Admit::Skip
        } else {
            Admit::Take
        }
    }

    fn ready(&self, entry: &Entry<T>) -> bool {
        !self.is_busy(&entry.receipt)
    }

    fn sent(&mut self, batch: &[Entry<T>]) {
        if let Some(busy) = &mut self.busy {
            busy.extend(batch.iter().map(|entry| Arc::clone(&entry.receipt)));
        }
    }
}

#[cfg(test)]
mod tests;
