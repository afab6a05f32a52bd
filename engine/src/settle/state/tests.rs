use std::time::Duration;

use super::*;
use crate::limits::MAX_VISIBILITY;

const VT: Duration = Duration::from_secs(30);

fn state() -> SettleState<&'static str> {
    state_filling(DeleteFill::AtOnce)
}

fn state_filling(fill: DeleteFill) -> SettleState<&'static str> {
    SettleState::new(
        CoalescerConfig {
            max_batch: 10,
            max_wait: Duration::from_millis(5),
            max_in_flight: 4,
        },
        HeartbeatConfig::for_visibility(VT, None),
        fill,
    )
}

fn register(state: &mut SettleState<&'static str>, receipt: &str, at: Instant) -> u64 {
    state
        .register(
            Arc::from(receipt),
            Arc::from(receipt),
            at + VT,
            at + MAX_VISIBILITY,
        )
        .0
        .expect("the heartbeat is on")
}

fn retry_after(receipt: &str, delay: Duration, at: Instant) -> Entry<Token<&'static str>> {
    Entry {
        receipt: Arc::from(receipt),
        visibility: Some(VisibilityTarget {
            delay,
            window_end: at + MAX_VISIBILITY,
        }),
        enqueued_at: at,
        token: Token::Settle("handler"),
    }
}

/// What each batch asks for: `receipt=seconds` per entry, `+` marking an extension.
fn described(batches: &[Batch<Token<&'static str>>], now: Instant) -> Vec<Vec<String>> {
    batches
        .iter()
        .map(|batch| {
            batch
                .entries
                .iter()
                .map(|entry| {
                    let seconds = entry.visibility.map_or(0, |t| t.seconds_at(now).0);
                    let kind = match entry.token {
                        Token::Extend { .. } => "+",
                        Token::Settle(_) => "",
                    };
                    format!("{kind}{}={seconds}", entry.receipt)
                })
                .collect()
        })
        .collect()
}

fn delete(receipt: &str, at: Instant) -> Entry<Token<&'static str>> {
    Entry {
        receipt: Arc::from(receipt),
        visibility: None,
        enqueued_at: at,
        token: Token::Settle("handler"),
    }
}

#[test]
fn a_delete_waits_for_the_deliveries_still_out_only_where_filling_is_on() {
    for fill in [
        DeleteFill::FromDeliveriesOut(Answers::Awaited),
        DeleteFill::AtOnce,
    ] {
        let start = Instant::now();
        let mut s = state_filling(fill);
        let keys: Vec<u64> = (0..10)
            .map(|i| register(&mut s, &format!("r{i}"), start))
            .collect();
        s.settle(Some(keys[0]), Lane::Delete, |_| delete("r0", start))
            .expect("open");
        let sent = s.poll(start).len();
        let waits = fill == DeleteFill::FromDeliveriesOut(Answers::Awaited);
        assert_eq!(sent, usize::from(!waits), "{fill:?}: nine more out");
        if waits {
            for (i, key) in keys.iter().enumerate().skip(1) {
                s.settle(Some(*key), Lane::Delete, |_| {
                    delete(&format!("r{i}"), start)
                })
                .expect("open");
            }
            let batches = s.poll(start);
            assert_eq!(batches.len(), 1);
            assert_eq!(batches[0].entries.len(), 10, "one full call");
        }
    }
}

#[test]
fn a_delete_nobody_awaits_waits_longer_for_the_deliveries_out() {
    let wait = Duration::from_millis(5);
    for (fill, patience) in [
        (DeleteFill::FromDeliveriesOut(Answers::Awaited), wait * 2),
        (
            DeleteFill::FromDeliveriesOut(Answers::Detached),
            Duration::from_millis(100),
        ),
    ] {
        let start = Instant::now();
        let mut s = state_filling(fill);
        let keys: Vec<u64> = (0..20)
            .map(|i| register(&mut s, &format!("r{i}"), start))
            .collect();
        for (i, key) in keys.iter().enumerate().take(4) {
            s.settle(Some(*key), Lane::Delete, |_| {
                delete(&format!("r{i}"), start)
            })
            .expect("open");
        }
        let just_before = start + patience - Duration::from_micros(1);
        assert!(
            s.poll(just_before).is_empty(),
            "{fill:?}: sixteen out would fill the batch"
        );
        let sent = s.poll(start + patience);
        assert_eq!(sent.len(), 1, "{fill:?}: due after {patience:?}");
        assert_eq!(sent[0].entries.len(), 4);
    }
    // The cap holds whatever the batch wait, and never falls below the awaited patience.
    assert_eq!(
        DeleteFill::FromDeliveriesOut(Answers::Detached).patience(Duration::from_millis(50)),
        Some(Duration::from_millis(100))
    );
    assert_eq!(
        DeleteFill::FromDeliveriesOut(Answers::Detached).patience(Duration::from_millis(200)),
        Some(Duration::from_millis(400))
    );
    assert_eq!(
        DeleteFill::FromDeliveriesOut(Answers::Detached).patience(Duration::ZERO),
        Some(Duration::ZERO)
    );
}

#[test]
fn a_lone_delete_goes_at_once_with_filling_on() {
    let start = Instant::now();
    let mut s = state_filling(DeleteFill::FromDeliveriesOut(Answers::Awaited));
    let key = register(&mut s, "r", start);
    s.settle(Some(key), Lane::Delete, |_| delete("r", start))
        .expect("open");
    assert_eq!(s.poll(start).len(), 1, "nothing else is out");
}

#[test]
fn a_settlement_before_its_extension_goes_out_takes_the_extension_with_it() {
    let start = Instant::now();
    let mut s = state();
    let key = register(&mut s, "r", start);
    let other = register(&mut s, "o", start);
    s.settle(Some(other), Lane::Visibility, |_| {
        retry_after("o", Duration::ZERO, start)
    })
    .expect("open");
    let o_call = s.poll(start);
    assert_eq!(described(&o_call, start), vec![vec!["o=0"]]);
    // r's extension falls due and waits on the lane behind o's call; then the handler
    // settles r with a retry_after longer than the visibility timeout.
    let due = start + Duration::from_secs(24);
    assert!(s.poll(due).is_empty());
    s.settle(Some(key), Lane::Visibility, |deadline| {
        assert_eq!(deadline, Some(start + VT), "the deadline as last known");
        retry_after("r", Duration::from_secs(100), due)
    })
    .expect("open");
    let sent = s.poll(due + Duration::from_millis(10));
    assert_eq!(
        described(&sent, due),
        vec![vec!["r=100"]],
        "the extension of a settled message never goes out"
    );
    assert_eq!(s.tracked(), 0);
}

#[test]
fn an_extension_already_in_a_call_goes_out_before_the_settlement_of_its_message() {
    let start = Instant::now();
    let mut s = state();
    let key = register(&mut s, "r", start);
    let due = start + Duration::from_secs(24);
    let extension = s.poll(due);
    assert_eq!(described(&extension, due), vec![vec!["+r=30"]]);
    s.settle(Some(key), Lane::Visibility, |_| {
        retry_after("r", Duration::from_secs(100), due)
    })
    .expect("open");
    assert!(
        s.poll(due + Duration::from_secs(1)).is_empty(),
        "nothing for r goes out before its extension's answer"
    );
    s.finish(
        Lane::Visibility,
        extension[0].entries.iter().map(|e| &e.receipt),
    );
    assert!(
        !s.extended(key, due, 30, false),
        "settled: no next extension"
    );
    let after = s.poll(due + Duration::from_secs(1));
    assert_eq!(described(&after, due), vec![vec!["r=100"]]);
}

#[test]
fn extensions_stop_while_draining_and_a_drained_state_refuses_settlements() {
    let start = Instant::now();
    let mut s = state();
    register(&mut s, "r", start);
    assert_eq!(s.next_deadline(), Some(start + Duration::from_secs(24)));
    s.drain();
    assert_eq!(s.next_deadline(), None);
    assert!(s.poll(start + Duration::from_secs(60)).is_empty());
    assert!(s.close_if_done());
    assert!(
        s.settle(None, Lane::Delete, |_| retry_after(
            "x",
            Duration::ZERO,
            start
        ))
        .is_err()
    );
}

#[test]
fn a_registration_due_before_the_driver_looks_wakes_it_and_a_later_one_does_not() {
    let start = Instant::now();
    let mut s = state();
    assert!(
        s.register(
            Arc::from("a"),
            Arc::from("a"),
            start + VT,
            start + MAX_VISIBILITY
        )
        .1
    );
    s.poll(start);
    assert_eq!(s.armed, Some(start + Duration::from_secs(24)));
    let later = start + Duration::from_secs(5);
    assert!(
        !s.register(
            Arc::from("b"),
            Arc::from("b"),
            later + VT,
            later + MAX_VISIBILITY
        )
        .1
    );
    let sooner = start + Duration::from_secs(10);
    assert!(
        s.register(
            Arc::from("c"),
            Arc::from("c"),
            sooner,
            sooner + MAX_VISIBILITY
        )
        .1
    );
}

#[test]
fn a_dropped_delivery_is_extended_no_more() {
    let start = Instant::now();
    let mut s = state();
    let key = register(&mut s, "r", start);
    assert_eq!(s.forget(key), Some(start + VT));
    assert!(s.poll(start + Duration::from_secs(60)).is_empty());
    assert_eq!(s.next_deadline(), None);
}

#[test]
fn a_registration_due_when_the_driver_looks_anyway_does_not_wake_it() {
    let start = Instant::now();
    let mut s = state();
    register(&mut s, "a", start);
    s.poll(start);
    assert_eq!(s.armed, Some(start + Duration::from_secs(24)));
    assert!(
        !s.register(
            Arc::from("b"),
            Arc::from("b"),
            start + VT,
            start + MAX_VISIBILITY
        )
        .1,
        "due exactly when the driver wakes"
    );
}

#[test]
fn extensions_due_within_a_margin_fill_the_visibility_call_that_goes_out() {
    let start = Instant::now();
    let mut s = state();
    // Due at 24 s; the margin is 6 s, the slack 3 s.
    register(&mut s, "a", start);
    // Due at 28 s and 29 s: past the slack, within the margin.
    register(&mut s, "b", start + Duration::from_secs(4));
    register(&mut s, "c", start + Duration::from_secs(5));
    // Due at 31 s: past the margin.
    register(&mut s, "d", start + Duration::from_secs(7));
    let due = start + Duration::from_secs(24);
    let sent = s.poll(due);
    assert_eq!(described(&sent, due), vec![vec!["+a=30", "+b=30", "+c=30"]]);
    assert_eq!(s.next_deadline(), Some(start + Duration::from_secs(31)));
}

#[test]
fn full_visibility_calls_take_no_extension_early() {
    let start = Instant::now();
    let mut s = state();
    register(&mut s, "a", start);
    register(&mut s, "b", start + Duration::from_secs(4));
    // With a's extension, three full calls of ten.
    for i in 0..29 {
        s.settle(None, Lane::Visibility, |_| {
            retry_after(&format!("r{i}"), Duration::ZERO, start)
        })
        .expect("open");
    }
    let due = start + Duration::from_secs(24);
    let sent = s.poll(due);
    let sizes: Vec<usize> = sent.iter().map(|batch| batch.entries.len()).collect();
    assert_eq!(sizes, [10, 10, 10]);
    assert_eq!(
        s.next_deadline(),
        Some(start + Duration::from_secs(28)),
        "b waits for its own due time"
    );
}

#[test]
fn a_longer_round_trip_lets_more_entries_wait_before_settlement_is_behind() {
    let start = Instant::now();
    let mut s: SettleState<&'static str> = SettleState::new(
        CoalescerConfig {
            max_batch: 10,
            max_wait: Duration::from_millis(5),
            max_in_flight: 128,
        },
        None,
        DeleteFill::AtOnce,
    );
    // Sixteen calls of ten are allowed in flight before any round trip is known.
    for i in 0..=160 {
        assert!(!s.is_backlogged(), "{i} entries waiting");
        s.settle(None, Lane::Delete, |_| Entry {
            receipt: Arc::from(format!("r{i}")),
            visibility: None,
            enqueued_at: start,
            token: Token::Settle("handler"),
        })
        .expect("open");
    }
    assert!(s.is_backlogged());
    s.round_trip(Duration::from_millis(50), false);
    assert!(!s.is_backlogged(), "128 calls of ten may be in flight");
}

#[test]
fn a_failed_extension_is_of_consequence_only_while_the_delivery_is_tracked() {
    let start = Instant::now();
    let mut s = state();
    let key = register(&mut s, "r", start);
    let at = start + Duration::from_secs(24);
    assert_eq!(s.poll(at).len(), 1, "the extension goes out");
    let (after, wake) = s.failed(key, at, false);
    assert_eq!(
        after,
        AfterFailure::Retry {
            due: at + Duration::from_secs(1),
            deadline: start + VT,
        }
    );
    assert!(
        wake,
        "the driver sleeps with nothing due: the retry wakes it"
    );
    s.forget(key);
    assert_eq!(s.failed(key, at, false), (AfterFailure::Untracked, false));
}

#[test]
fn an_idle_state_is_not_closed_before_it_drains() {
    let start = Instant::now();
    let mut s = state();
    assert!(!s.close_if_done());
    assert!(!s.is_draining());
    s.settle(None, Lane::Delete, |_| {
        retry_after("x", Duration::ZERO, start)
    })
    .expect("open");
    s.drain();
    assert!(s.is_draining());
    assert!(!s.close_if_done(), "an entry is still pending");
}
