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
//! the handler's retry) reach SQS in the order they were made ([`DistinctKeys`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::visibility::VisibilityTarget;
use crate::sqs::batch::distinct::{DistinctKeys, Keyed};
use crate::sqs::batch::{BatchConfig, Batcher, FlushReason, Queued};
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

impl<T> Keyed for Entry<T> {
    fn key(&self) -> &Arc<str> {
        &self.receipt
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
    lanes: [Batcher<Entry<T>, DistinctKeys>; 2],
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
                DistinctKeys::new(ordered),
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

    fn lane(&mut self, lane: Lane) -> &mut Batcher<Entry<T>, DistinctKeys> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    const WAIT: Duration = Duration::from_millis(5);
    const NONE: [&Arc<str>; 0] = [];

    #[test]
    fn calls_allowed_in_flight_follow_the_round_trip_within_the_cap() {
        let mut c = coalescer(128);
        assert_eq!(c.allowed(), 16, "before any answer");
        c.round_trip(Duration::from_millis(1), false);
        assert_eq!(
            c.allowed(),
            16,
            "a short round trip keeps batches waiting for full ones"
        );
        c.round_trip(Duration::from_millis(4), false);
        assert_eq!(c.allowed(), 60);
        c.round_trip(Duration::from_millis(50), false);
        assert_eq!(c.allowed(), 128, "the cap");
        let mut small = coalescer(4);
        small.round_trip(Duration::from_millis(50), false);
        assert_eq!(small.allowed(), 4, "a cap below the floor");
    }

    #[test]
    fn a_round_trip_made_long_by_queueing_at_the_server_allows_no_more_calls() {
        let mut c = coalescer(128);
        c.round_trip(Duration::from_millis(4), false);
        assert_eq!(c.allowed(), 60);
        c.round_trip(Duration::from_millis(40), true);
        assert_eq!(c.allowed(), 60, "queueing: no more than before");
        c.round_trip(Duration::from_millis(2), true);
        assert_eq!(c.allowed(), 30, "a shorter round trip still allows fewer");
        c.round_trip(Duration::from_millis(40), false);
        assert_eq!(
            c.allowed(),
            128,
            "the network's round trip: as many as it needs"
        );
    }

    #[test]
    fn more_entries_waiting_than_the_calls_in_flight_carry_is_a_backlog() {
        let mut c = coalescer(1);
        let now = Instant::now();
        for i in 0..10 {
            c.push(Lane::Delete, entry(&format!("r{i}"), now, i));
        }
        assert!(
            !c.is_backlogged(),
            "one full batch for the one call allowed"
        );
        c.push(Lane::Visibility, entry("r10", now, 10));
        assert!(c.is_backlogged(), "both lanes count");
        let batch = c.poll_batch(now).expect("a batch goes out");
        assert_eq!(batch.entries.len(), 10);
        assert!(!c.is_backlogged());
    }

    /// A coalescer allowing four calls in flight, with one call of `lane` in flight since `at`
    /// (the entry "busy", token 0).
    fn busy(lane: Lane, at: Instant) -> Coalescer<u32> {
        let mut c = coalescer(4);
        c.push(lane, entry("busy", at, 0));
        let batch = c.poll_batch(at).expect("idle flush");
        assert_eq!(batch.reason, FlushReason::Idle);
        c
    }

    fn coalescer(max_in_flight: usize) -> Coalescer<u32> {
        Coalescer::new(CoalescerConfig {
            max_batch: 10,
            max_wait: WAIT,
            max_in_flight,
        })
    }

    fn entry(receipt: &str, at: Instant, token: u32) -> Entry<u32> {
        Entry {
            receipt: Arc::from(receipt),
            visibility: None,
            enqueued_at: at,
            token,
        }
    }

    fn tokens(batch: &Batch<u32>) -> Vec<u32> {
        batch.entries.iter().map(|e| e.token).collect()
    }

    #[test]
    fn a_lone_entry_on_an_idle_lane_goes_out_at_once() {
        let now = Instant::now();
        let mut c = coalescer(4);
        assert!(c.push(Lane::Delete, entry("a", now, 1)));
        let batch = c.poll_batch(now).expect("due at once");
        assert_eq!(batch.reason, FlushReason::Idle);
        assert_eq!(batch.lane, Lane::Delete);
        assert_eq!(tokens(&batch), [1]);
        assert!(c.poll_batch(now).is_none());
        assert_eq!(c.in_flight(Lane::Delete), 1);
    }

    #[test]
    fn an_idle_delete_lane_waits_for_the_deliveries_out_to_fill_its_batch() {
        let start = Instant::now();
        let mut c = coalescer(4);
        // Six deliveries still out: with four waiting, they would fill the batch.
        c.expect(6, WAIT * 2);
        for i in 0..4 {
            c.push(Lane::Delete, entry(&format!("r{i}"), start, i));
        }
        assert!(c.poll_batch(start).is_none(), "waits for the rest");
        assert_eq!(c.next_deadline(), Some(start + WAIT * 2));
        for i in 4..10 {
            c.push(Lane::Delete, entry(&format!("r{i}"), start + WAIT / 2, i));
        }
        let batch = c.poll_batch(start + WAIT / 2).expect("full");
        assert_eq!(batch.reason, FlushReason::Full);
        assert_eq!(tokens(&batch), (0..10).collect::<Vec<_>>());

        // The deliveries out may be slow: the batch goes out at twice the batch wait all the
        // same.
        let later = start + WAIT * 4;
        c.finish(Lane::Delete, &[]);
        c.expect(9, WAIT * 2);
        c.push(Lane::Delete, entry("slow", later, 10));
        assert!(c.poll_batch(later + WAIT).is_none());
        let batch = c
            .poll_batch(later + WAIT * 2)
            .expect("due at twice the wait");
        assert_eq!(batch.reason, FlushReason::Deadline);
        assert_eq!(tokens(&batch), [10]);
    }

    #[test]
    fn an_idle_lane_sends_at_once_what_the_deliveries_out_cannot_fill() {
        let now = Instant::now();
        let mut c = coalescer(4);
        // Five out and four waiting: nine, one short of a batch.
        c.expect(5, WAIT * 2);
        for i in 0..4 {
            c.push(Lane::Delete, entry(&format!("r{i}"), now, i));
        }
        let batch = c.poll_batch(now).expect("idle flush");
        assert_eq!(batch.reason, FlushReason::Idle);
        // The visibility lane never waits: its entries are retries, and extensions that fall due.
        c.expect(100, WAIT * 2);
        c.push(Lane::Visibility, entry("v", now, 9));
        let batch = c.poll_batch(now).expect("idle flush");
        assert_eq!(batch.lane, Lane::Visibility);
        assert_eq!(batch.reason, FlushReason::Idle);
    }

    #[test]
    fn while_a_call_is_in_flight_entries_wait_for_a_full_batch() {
        let now = Instant::now();
        let mut c = coalescer(4);
        c.push(Lane::Delete, entry("first", now, 0));
        c.poll_batch(now).expect("idle flush");
        for i in 1..10 {
            c.push(Lane::Delete, entry(&format!("r{i}"), now, i));
            assert!(c.poll_batch(now).is_none(), "not due with {i} entries");
        }
        assert!(
            c.push(Lane::Delete, entry("r10", now, 10)),
            "the tenth wakes the driver"
        );
        let batch = c.poll_batch(now).expect("full");
        assert_eq!(batch.reason, FlushReason::Full);
        assert_eq!(tokens(&batch), (1..=10).collect::<Vec<_>>());
    }

    #[test]
    fn the_oldest_entry_waits_at_most_max_wait() {
        let start = Instant::now();
        let mut c = busy(Lane::Visibility, start);
        assert!(
            c.push(Lane::Visibility, entry("a", start, 1)),
            "first pending arms a deadline"
        );
        assert!(!c.push(Lane::Visibility, entry("b", start + WAIT / 2, 2)));
        assert_eq!(c.next_deadline(), Some(start + WAIT));
        assert!(
            c.poll_batch(start + WAIT - Duration::from_micros(1))
                .is_none()
        );
        let batch = c.poll_batch(start + WAIT).expect("deadline");
        assert_eq!(batch.reason, FlushReason::Deadline);
        assert_eq!(tokens(&batch), [1, 2]);
        assert_eq!(c.next_deadline(), None);
    }

    #[test]
    fn behind_a_call_in_flight_deletes_the_deliveries_out_would_fill_wait_twice_as_long() {
        let start = Instant::now();
        let mut c = busy(Lane::Delete, start);
        // Twenty still out: they would fill the batch.
        c.expect(20, WAIT * 2);
        c.push(Lane::Delete, entry("a", start, 1));
        assert_eq!(c.next_deadline(), Some(start + WAIT * 2));
        assert!(
            c.poll_batch(start + WAIT).is_none(),
            "the deliveries out would fill it"
        );
        let batch = c.poll_batch(start + WAIT * 2).expect("deadline");
        assert_eq!(batch.reason, FlushReason::Deadline);
        assert_eq!(tokens(&batch), [1]);
        // Three out and one waiting cannot fill one: the batch wait alone.
        let later = start + WAIT * 2;
        c.expect(3, WAIT * 2);
        c.push(Lane::Delete, entry("b", later, 2));
        assert_eq!(c.next_deadline(), Some(later + WAIT));
        let batch = c.poll_batch(later + WAIT).expect("deadline");
        assert_eq!(tokens(&batch), [2]);
    }

    #[test]
    fn a_finished_call_lets_the_waiting_entries_go_at_once() {
        let now = Instant::now();
        let mut c = coalescer(1);
        c.push(Lane::Delete, entry("a", now, 1));
        c.poll_batch(now).expect("idle");
        assert!(
            !c.push(Lane::Delete, entry("b", now, 2)),
            "no room for a call"
        );
        assert_eq!(
            c.next_deadline(),
            None,
            "no deadline while the lane is full of calls"
        );
        c.finish(Lane::Delete, NONE);
        let batch = c.poll_batch(now).expect("idle again");
        assert_eq!(batch.reason, FlushReason::Idle);
        assert_eq!(tokens(&batch), [2]);
    }

    #[test]
    fn a_batch_never_carries_one_receipt_handle_twice() {
        let now = Instant::now();
        let mut c = busy(Lane::Delete, now);
        for (i, receipt) in ["x", "y", "x", "z", "x"].into_iter().enumerate() {
            c.push(Lane::Delete, entry(receipt, now, i as u32 + 1));
        }
        let first = c.poll_batch(now + WAIT).expect("deadline");
        assert_eq!(tokens(&first), [1, 2, 4]);
        c.finish(Lane::Delete, NONE);
        c.finish(Lane::Delete, NONE);
        let second = c.poll_batch(now + WAIT).expect("idle");
        assert_eq!(tokens(&second), [3]);
        c.finish(Lane::Delete, NONE);
        let third = c.poll_batch(now + WAIT).expect("idle");
        assert_eq!(tokens(&third), [5]);
    }

    #[test]
    fn a_receipt_handle_waits_for_its_visibility_call_in_flight() {
        let now = Instant::now();
        let mut c = coalescer(4);
        c.push(Lane::Visibility, entry("x", now, 1));
        let first = c.poll_batch(now).expect("idle");
        c.push(Lane::Visibility, entry("x", now, 2));
        c.push(Lane::Visibility, entry("y", now, 3));
        let second = c.poll_batch(now + WAIT).expect("y is due");
        assert_eq!(
            tokens(&second),
            [3],
            "x waits while its first call is in flight"
        );
        assert!(c.poll_batch(now + WAIT).is_none());
        assert_eq!(c.next_deadline(), None, "x is blocked, not due");
        c.finish(Lane::Visibility, first.entries.iter().map(|e| &e.receipt));
        let third = c.poll_batch(now + WAIT).expect("x may go now");
        assert_eq!(tokens(&third), [2]);
    }

    #[test]
    fn lanes_flush_independently() {
        let now = Instant::now();
        let mut c = coalescer(4);
        c.push(Lane::Delete, entry("a", now, 1));
        c.push(Lane::Visibility, entry("a", now, 2));
        let first = c.poll_batch(now).expect("delete idle");
        let second = c.poll_batch(now).expect("visibility idle");
        assert_eq!((first.lane, second.lane), (Lane::Delete, Lane::Visibility));
    }

    #[test]
    fn no_more_calls_than_allowed_are_in_flight() {
        let now = Instant::now();
        let mut c = coalescer(2);
        for i in 0..40 {
            c.push(Lane::Delete, entry(&format!("r{i}"), now, i));
        }
        assert!(c.poll_batch(now).is_some());
        assert!(c.poll_batch(now).is_some());
        assert!(c.poll_batch(now + WAIT * 10).is_none());
        assert_eq!(c.pending(Lane::Delete), 20);
    }

    #[test]
    fn draining_sends_everything_at_once() {
        let now = Instant::now();
        let mut c = busy(Lane::Delete, now);
        c.push(Lane::Delete, entry("a", now, 1));
        assert!(c.poll_batch(now).is_none());
        c.drain();
        let batch = c.poll_batch(now).expect("shutdown flush");
        assert_eq!(batch.reason, FlushReason::Shutdown);
        assert!(!c.is_idle(), "two calls still in flight");
        c.finish(Lane::Delete, NONE);
        c.finish(Lane::Delete, NONE);
        assert!(c.is_idle());
    }

    proptest! {
        /// Whatever the order of pushes, polls and finished calls, every entry goes out exactly
        /// once, in batches of at most ten distinct receipt handles, never with more calls in
        /// flight than allowed.
        #[test]
        fn every_entry_goes_out_once_in_valid_batches(
            ops in proptest::collection::vec((0u8..4, 0u8..12, 0u64..8), 1..300),
            max_in_flight in 1usize..4,
        ) {
            let start = Instant::now();
            let mut c = coalescer(max_in_flight);
            let mut now = start;
            let mut next_token = 0u32;
            let mut sent: Vec<u32> = Vec::new();
            let mut in_flight: Vec<Batch<u32>> = Vec::new();
            for (op, receipt, advance_ms) in ops {
                now += Duration::from_millis(advance_ms);
                match op {
                    0 | 1 => {
                        let lane = if op == 0 { Lane::Delete } else { Lane::Visibility };
                        c.push(lane, entry(&format!("r{receipt}"), now, next_token));
                        next_token += 1;
                    }
                    2 => {
                        if let Some(batch) = in_flight.pop() {
                            c.finish(batch.lane, batch.entries.iter().map(|e| &e.receipt));
                        }
                    }
                    _ => {}
                }
                while let Some(batch) = c.poll_batch(now) {
                    prop_assert!(!batch.entries.is_empty() && batch.entries.len() <= 10);
                    let distinct: HashSet<_> = batch.entries.iter().map(|e| e.receipt.clone()).collect();
                    prop_assert_eq!(distinct.len(), batch.entries.len());
                    sent.extend(batch.entries.iter().map(|e| e.token));
                    if batch.lane == Lane::Visibility {
                        for other in in_flight.iter().filter(|b| b.lane == Lane::Visibility) {
                            for entry in &batch.entries {
                                prop_assert!(other.entries.iter().all(|e| e.receipt != entry.receipt),
                                    "one receipt handle in two visibility calls at once");
                            }
                        }
                    }
                    in_flight.push(batch);
                }
                for lane in Lane::ALL {
                    prop_assert!(c.in_flight(lane) <= max_in_flight);
                }
            }
            c.drain();
            loop {
                while let Some(batch) = c.poll_batch(now) {
                    sent.extend(batch.entries.iter().map(|e| e.token));
                    in_flight.push(batch);
                }
                match in_flight.pop() {
                    Some(batch) => c.finish(batch.lane, batch.entries.iter().map(|e| &e.receipt)),
                    None => break,
                }
            }
            prop_assert!(c.is_idle());
            sent.sort_unstable();
            prop_assert_eq!(sent, (0..next_token).collect::<Vec<_>>());
        }
    }
}
