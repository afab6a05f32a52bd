//! The receivers' count, event by event on a made-up clock: no receiver runs here.

use super::*;

const MS: Duration = Duration::from_millis(1);

/// A count of receives of ten, at most `most` receivers, with `active` running.
fn count(most: usize, active: usize) -> ReceiverCount {
    let mut count = ReceiverCount::new(10, most);
    for _ in 0..active {
        count.start_first();
    }
    count
}

/// A full batch handed on, called at `called_at`, with room for many more receives.
fn full(called_at: Instant) -> Answered {
    Answered {
        called_at,
        full: true,
        own: 10,
        taken: 0,
        pressure: 0,
        room: 100,
        could_take: None,
        rate_cap: None,
        stopping: false,
    }
}

/// The round trip measured unloaded: sixteen full receives of `took` with few in flight.
fn measured(count: &mut ReceiverCount, took: Duration) {
    for _ in 0..16 {
        count.answered_full(took);
    }
}

#[test]
fn an_empty_receive_ends_a_receiver_but_never_the_last() {
    let mut count = count(10, 2);
    assert_eq!(count.after_empty(), Next::End);
    assert_eq!(count.active(), 1);
    assert_eq!(count.after_empty(), Next::GO, "the last one stays");
    assert_eq!(count.active(), 1);
}

#[test]
fn the_first_full_receive_while_a_taker_waits_starts_the_few_that_measure_the_round_trip() {
    let now = Instant::now();
    let mut count = count(64, 1);
    count.taker_waits();
    assert_eq!(count.after_batch(now, full(now)), Next::Go { start: 7 });
    assert_eq!(count.active(), LIGHT_IN_FLIGHT);
    let mut few = self::count(4, 1);
    few.taker_waits();
    assert_eq!(
        few.after_batch(now, full(now)),
        Next::Go { start: 3 },
        "at most `most`"
    );
}

#[test]
fn once_the_round_trip_is_known_two_start_a_full_receive_up_to_those_it_is_worth() {
    let now = Instant::now();
    let mut count = count(12, 8);
    measured(&mut count, 100 * MS);
    count.taker_waits();
    assert_eq!(count.after_batch(now, full(now)), Next::Go { start: 2 });
    assert_eq!(count.after_batch(now, full(now)), Next::Go { start: 2 });
    assert_eq!(count.active(), 12);
    assert_eq!(
        count.after_batch(now, full(now)),
        Next::GO,
        "all twelve run"
    );
}

#[test]
fn a_short_round_trip_is_worth_the_fewest_useful_receivers() {
    let now = Instant::now();
    let mut count = count(64, 8);
    // 1 ms is worth 6 receivers by the round trip: the floor is eight.
    measured(&mut count, MS);
    count.taker_waits();
    assert_eq!(count.after_batch(now, full(now)), Next::GO);
    assert_eq!(count.active(), MIN_USEFUL_RECEIVERS);
}

#[test]
fn receivers_bring_twice_what_the_workers_take() {
    let start = Instant::now();
    let mut count = count(100, 8);
    measured(&mut count, 100 * MS);
    count.taker_waits();
    // The first look opens the take rate's window; a second later, 1,000 were taken.
    assert_eq!(count.after_batch(start, full(start)), Next::Go { start: 2 });
    count.received(1_000);
    let later = start + Duration::from_secs(1);
    let taken = Answered {
        taken: 1_000,
        ..full(later)
    };
    for _ in 0..10 {
        count.after_batch(later, taken);
    }
    // 2 × 1,000 a second over batches of ten, times 0.1 s in flight: 20 receives.
    assert_eq!(count.active(), 20);
}

#[test]
fn receivers_that_outrun_the_workers_end_and_a_partial_receive_ends_one() {
    let now = Instant::now();
    let mut count = count(64, 3);
    // Eight batches wait, besides this one, and no taker waited: more than two rounds of three.
    count.received(90);
    assert_eq!(count.after_batch(now, full(now)), Next::End);
    // All taken now, and a taker waits; a partial receive still ends one.
    let partial = Answered {
        full: false,
        own: 3,
        taken: 90,
        ..full(now)
    };
    count.taker_waits();
    assert_eq!(count.after_batch(now, partial), Next::End);
    assert_eq!(
        count.after_batch(now, partial),
        Next::GO,
        "the last one stays"
    );
}

#[test]
fn no_receiver_starts_without_room_while_stopping_or_while_receives_queue_at_the_server() {
    let now = Instant::now();
    let mut count = count(64, 8);
    measured(&mut count, 10 * MS);
    // Four more run now: their samples are loaded ones.
    for _ in 0..4 {
        count.start_first();
    }
    count.taker_waits();
    let no_room = Answered {
        room: 0,
        ..full(now)
    };
    assert_eq!(count.after_batch(now, no_room), Next::GO);
    let stopping = Answered {
        stopping: true,
        ..full(now)
    };
    assert_eq!(count.after_batch(now, stopping), Next::GO);
    // Loaded: the round trip now climbs past twice the unloaded one.
    for _ in 0..16 {
        count.answered_full(25 * MS);
    }
    assert_eq!(count.after_batch(now, full(now)), Next::GO);
    assert_eq!(count.active(), 12);
}

#[test]
fn a_taker_wait_that_ended_before_the_call_is_no_demand() {
    let before = Instant::now();
    let called = before + MS;
    let mut count = count(64, 1);
    count.taker_waits();
    count.taker_done(before);
    // Two batches wait: not short, and no taker waited during the call.
    count.received(30);
    assert_eq!(count.after_batch(called, full(called)), Next::GO);
    assert_eq!(count.active(), 1);
    count.taker_waits();
    count.taker_done(called + MS);
    assert_eq!(
        count.after_batch(called, full(called)),
        Next::Go { start: 7 }
    );
}

#[test]
fn a_failure_a_retry_may_mend_ends_a_receiver_unless_it_retries_a_fifo_attempt() {
    let mut count = count(64, 3);
    assert_eq!(
        count.after_failure(0, true, true),
        Next::GO,
        "its attempt to retry"
    );
    assert_eq!(
        count.after_failure(0, false, false),
        Next::GO,
        "a permanent failure"
    );
    assert_eq!(count.after_failure(0, true, false), Next::End);
    assert_eq!(count.after_failure(0, true, false), Next::End);
    assert_eq!(
        count.after_failure(0, true, false),
        Next::GO,
        "the last one retries"
    );
}

#[test]
fn pressure_cuts_the_receivers_to_one_until_the_round_trip_is_measured_again() {
    let now = Instant::now();
    let mut count = count(64, 8);
    measured(&mut count, 10 * MS);
    // A settlement call timed out: every receiver but one ends before its next call.
    for _ in 0..7 {
        assert_eq!(count.before_call(1, false), Next::End);
    }
    assert_eq!(count.before_call(1, false), Next::GO);
    assert_eq!(count.active(), 1);
    count.taker_waits();
    assert_eq!(
        count.after_batch(now, full(now)),
        Next::GO,
        "none start meanwhile"
    );
    // Sixteen samples with one in flight: the unloaded round trip is known again.
    measured(&mut count, 10 * MS);
    assert_eq!(count.after_batch(now, full(now)), Next::Go { start: 2 });
    // The same mark is no news.
    assert_eq!(count.before_call(1, false), Next::GO);
}

#[test]
fn receives_answering_four_times_slower_than_unloaded_are_measured_again() {
    let now = Instant::now();
    let mut count = count(64, 8);
    measured(&mut count, 10 * MS);
    for _ in 0..4 {
        count.start_first();
    }
    for _ in 0..32 {
        count.answered_full(60 * MS);
    }
    count.taker_waits();
    // Overloaded: measured again, and this receiver is one more than the measurement wants.
    assert_eq!(count.after_batch(now, full(now)), Next::End);
    assert_eq!(count.active(), 11);
}
