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
