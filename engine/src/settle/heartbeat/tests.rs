use super::*;
use crate::limits::MAX_VISIBILITY;

const VT: Duration = Duration::from_secs(30);

fn schedule() -> Schedule {
    Schedule::new(HeartbeatConfig::for_visibility(VT, None).expect("long enough"))
}

fn register(s: &mut Schedule, name: &str, received: Instant) -> u64 {
    s.register(
        Arc::from(name),
        Arc::from(name),
        received + VT,
        received + MAX_VISIBILITY,
    )
    .0
}

fn keys(extensions: &[Extension]) -> Vec<u64> {
    extensions.iter().map(|e| e.key).collect()
}

#[test]
fn a_two_second_visibility_is_extended_and_a_shorter_one_is_not() {
    assert!(HeartbeatConfig::for_visibility(Duration::from_secs(2), None).is_some());
    assert!(HeartbeatConfig::for_visibility(Duration::from_millis(1_999), None).is_none());
}

#[test]
fn a_deregistered_delivery_leaves_nothing_due() {
    let start = Instant::now();
    let mut s = schedule();
    let key = register(&mut s, "a", start);
    assert_eq!(s.next_due(), Some(start + VT - Duration::from_secs(6)));
    assert_eq!(s.deregister(key), Some(start + VT));
    assert_eq!(s.next_due(), None, "no wake-up left for it");
}

#[test]
fn the_default_margin_is_a_fifth_of_the_visibility_timeout() {
    let c = HeartbeatConfig::for_visibility(VT, None).expect("some");
    assert_eq!(c.margin, Duration::from_secs(6));
    assert_eq!(c.slack, Duration::from_secs(3));
    assert_eq!(c.extension, VT);
    let short = HeartbeatConfig::for_visibility(Duration::from_secs(3), None).expect("some");
    assert_eq!(short.margin, Duration::from_secs(1));
    assert_eq!(
        short.extension,
        Duration::from_secs(5),
        "five margins, longer than the timeout"
    );
    let asked = HeartbeatConfig::for_visibility(VT, Some(Duration::from_secs(20))).expect("some");
    assert_eq!(
        asked.margin,
        Duration::from_secs(15),
        "at most half the timeout"
    );
    assert!(HeartbeatConfig::for_visibility(Duration::from_secs(1), None).is_none());
}

#[test]
fn nothing_is_due_before_the_margin() {
    let start = Instant::now();
    let mut s = schedule();
    register(&mut s, "a", start);
    assert_eq!(s.next_due(), Some(start + Duration::from_secs(24)));
    assert!(s.poll_due(start + Duration::from_secs(20)).is_empty());
    let due = s.poll_due(start + Duration::from_secs(24));
    assert_eq!(due.len(), 1);
    assert!(!due[0].last);
    assert_eq!(due[0].extension, VT);
}

#[test]
fn deliveries_due_within_the_slack_are_extended_together() {
    let start = Instant::now();
    let mut s = schedule();
    let a = register(&mut s, "a", start);
    let b = register(&mut s, "b", start + Duration::from_secs(2));
    let c = register(&mut s, "c", start + Duration::from_secs(4));
    let due = s.poll_due(start + Duration::from_secs(24));
    assert_eq!(keys(&due), [a, b], "b is within the 3 s slack, c is not");
    assert!(
        s.poll_due(start + Duration::from_secs(25)).is_empty(),
        "the slack counts from a due extension, not from whenever the schedule is polled"
    );
    assert_eq!(keys(&s.poll_due(start + Duration::from_secs(28))), [c]);
}

#[test]
fn an_extension_moves_the_deadline_and_the_next_one_follows() {
    let start = Instant::now();
    let mut s = schedule();
    let a = register(&mut s, "a", start);
    let at = start + Duration::from_secs(24);
    assert_eq!(keys(&s.poll_due(at)), [a]);
    assert_eq!(
        s.next_due(),
        None,
        "nothing due while the extension is in flight"
    );
    s.extended(a, at, 30, false);
    assert_eq!(s.deadline(a), Some(at + VT));
    assert_eq!(s.next_due(), Some(at + Duration::from_secs(24)));
}

#[test]
fn an_applied_extension_says_when_the_next_one_falls_due() {
    let start = Instant::now();
    let mut s = schedule();
    let a = register(&mut s, "a", start);
    let at = start + Duration::from_secs(24);
    s.poll_due(at);
    assert_eq!(
        s.next_due(),
        None,
        "nothing due while the extension is in flight"
    );
    assert_eq!(
        s.extended(a, at, 30, false),
        Some(at + Duration::from_secs(24))
    );
    assert_eq!(
        s.extended(a, at, 30, true),
        None,
        "no extension after the last"
    );
}

#[test]
fn early_extensions_fill_a_batch_from_deliveries_due_within_one_margin() {
    let start = Instant::now();
    let mut s = schedule();
    let a = register(&mut s, "a", start);
    // Due 4 s, 5 s and 7 s after a: within the 6 s margin, except the last.
    let b = register(&mut s, "b", start + Duration::from_secs(4));
    let c = register(&mut s, "c", start + Duration::from_secs(5));
    register(&mut s, "d", start + Duration::from_secs(7));
    let now = start + Duration::from_secs(24);
    assert_eq!(keys(&s.poll_due(now)), [a]);
    assert_eq!(keys(&s.poll_early(now, 1)), [b], "no more than the room");
    assert_eq!(
        keys(&s.poll_early(now, 10)),
        [c],
        "d is due past the margin"
    );
    let (seconds, _) = visibility_seconds(VT, start + MAX_VISIBILITY, now);
    assert!(
        now + Duration::from_secs(u64::from(seconds)) > start + Duration::from_secs(5) + VT,
        "an early extension never ends before the deadline it replaces"
    );
}

#[test]
fn a_settled_delivery_is_extended_no_more() {
    let start = Instant::now();
    let mut s = schedule();
    let a = register(&mut s, "a", start);
    assert_eq!(s.deregister(a), Some(start + VT));
    assert!(s.poll_due(start + Duration::from_secs(60)).is_empty());
    assert_eq!(s.len(), 0);
    // An answer for it after it settled changes nothing.
    s.extended(a, start, 30, false);
    assert_eq!(s.len(), 0);
    assert_eq!(s.next_due(), None);
}

#[test]
fn a_delivery_settled_while_its_extension_is_in_flight_is_forgotten() {
    let start = Instant::now();
    let mut s = schedule();
    let a = register(&mut s, "a", start);
    s.poll_due(start + Duration::from_secs(24));
    assert!(s.deregister(a).is_some());
    s.extended(a, start + Duration::from_secs(24), 30, false);
    assert_eq!(s.next_due(), None);
}

#[test]
fn the_last_extension_ends_at_the_twelve_hour_window() {
    let received = Instant::now();
    let mut s = schedule();
    let a = register(&mut s, "a", received);
    // Keep extending until the window's end comes within one extension.
    let mut extensions = 0;
    loop {
        let now = s.next_due().expect("still due");
        let due = s.poll_due(now);
        assert_eq!(due.len(), 1);
        let (seconds, shortened) = visibility_seconds(due[0].extension, due[0].window_end, now);
        assert_eq!(shortened, due[0].last);
        s.extended(a, now, seconds, due[0].last);
        extensions += 1;
        if due[0].last {
            assert_eq!(s.deadline(a), Some(received + MAX_VISIBILITY));
            assert!(now <= received + MAX_VISIBILITY);
            break;
        }
        assert!(extensions < 10_000);
    }
    assert_eq!(s.next_due(), None, "no extension after the last");
    assert!(s.poll_due(received + MAX_VISIBILITY * 2).is_empty());
}

/// Registers `a` at `start` and takes its first extension (due at 24 s): in flight.
fn extending(s: &mut Schedule, start: Instant) -> u64 {
    let a = register(s, "a", start);
    assert_eq!(keys(&s.poll_due(start + Duration::from_secs(24))), [a]);
    a
}

#[test]
fn a_transient_failure_before_the_deadline_is_tried_again_a_second_later() {
    let start = Instant::now();
    let mut s = schedule();
    let a = extending(&mut s, start);
    let failed_at = start + Duration::from_secs(25);
    assert_eq!(
        s.failed(a, failed_at, false),
        AfterFailure::Retry {
            due: failed_at + Duration::from_secs(1),
            deadline: start + VT,
        }
    );
    assert_eq!(s.next_due(), Some(failed_at + Duration::from_secs(1)));
    assert!(
        s.poll_due(failed_at).is_empty(),
        "not again at once: no busy loop"
    );
    let again = s.poll_due(failed_at + Duration::from_secs(1));
    assert_eq!(keys(&again), [a], "tried again");
    assert!(!again[0].last);
}

#[test]
fn failures_in_a_row_back_off_and_never_fall_due_past_the_deadline() {
    let start = Instant::now();
    let mut s = schedule();
    let a = extending(&mut s, start);
    let deadline = start + VT;
    let mut now = start + Duration::from_secs(24);
    let mut delays = Vec::new();
    loop {
        match s.failed(a, now, false) {
            AfterFailure::Retry { due, deadline: d } => {
                assert_eq!(d, deadline);
                assert!(due <= deadline, "never due past the known deadline");
                assert!(due > now, "never due at once");
                delays.push(due - now);
                assert_eq!(keys(&s.poll_due(due)), [a]);
                now = due;
            }
            AfterFailure::GaveUp => break,
            AfterFailure::Untracked => panic!("still tracked"),
        }
    }
    assert_eq!(now, deadline, "tried until the deadline, given up at it");
    // A 6 s margin: 1 s, then at most a quarter of the margin (1.5 s), and the last one
    // cut short at the deadline.
    assert_eq!(delays[0], Duration::from_secs(1));
    assert!(
        delays[1..]
            .iter()
            .all(|d| *d <= Duration::from_millis(1_500))
    );
    assert_eq!(s.next_due(), None, "nothing more for it");
    assert_eq!(
        s.deadline(a),
        Some(deadline),
        "its deadline stays the last known"
    );
}

#[test]
fn the_retry_delay_doubles_up_to_a_quarter_of_the_margin() {
    let margin = Duration::from_secs(60);
    let delays: Vec<u64> = (1..=6)
        .map(|failures| retry_delay(failures, margin).as_secs())
        .collect();
    assert_eq!(delays, [1, 2, 4, 8, 15, 15]);
    assert_eq!(
        retry_delay(3, Duration::from_secs(1)),
        Duration::from_secs(1),
        "never under a second"
    );
    assert_eq!(retry_delay(u32::MAX, margin), Duration::from_secs(15));
}

#[test]
fn a_failure_past_the_deadline_gives_that_delivery_up_and_no_other() {
    let start = Instant::now();
    let mut s = schedule();
    let a = register(&mut s, "a", start);
    let b = register(&mut s, "b", start);
    let due = s.poll_due(start + Duration::from_secs(24));
    assert_eq!(due.len(), 2);
    assert_eq!(s.failed(a, start + VT, false), AfterFailure::GaveUp);
    s.extended(b, start + Duration::from_secs(24), 30, false);
    let later = s.poll_due(start + Duration::from_secs(48));
    assert_eq!(keys(&later), [b]);
    assert_eq!(
        s.deadline(a),
        Some(start + VT),
        "its deadline stays the last known"
    );
}

#[test]
fn a_permanent_refusal_gives_the_delivery_up_at_once() {
    let start = Instant::now();
    let mut s = schedule();
    let a = extending(&mut s, start);
    assert_eq!(
        s.failed(a, start + Duration::from_secs(24), true),
        AfterFailure::GaveUp
    );
    assert_eq!(s.next_due(), None);
    assert!(s.poll_due(start + VT).is_empty());
}

#[test]
fn an_applied_extension_after_failures_starts_the_backoff_afresh() {
    let start = Instant::now();
    let mut s = schedule();
    let a = extending(&mut s, start);
    let mut now = start + Duration::from_secs(24);
    for _ in 0..2 {
        let AfterFailure::Retry { due, .. } = s.failed(a, now, false) else {
            panic!("tried again");
        };
        s.poll_due(due);
        now = due;
    }
    s.extended(a, now, 30, false);
    let next = s.next_due().expect("the next extension");
    assert_eq!(next, now + Duration::from_secs(24));
    s.poll_due(next);
    assert_eq!(
        s.failed(a, next, false),
        AfterFailure::Retry {
            due: next + Duration::from_secs(1),
            deadline: now + VT,
        },
        "one second again, as after a first failure"
    );
}

#[test]
fn a_delivery_settled_while_waiting_for_a_retry_leaves_nothing_due() {
    let start = Instant::now();
    let mut s = schedule();
    let a = extending(&mut s, start);
    s.failed(a, start + Duration::from_secs(24), false);
    assert!(s.next_due().is_some());
    assert_eq!(s.deregister(a), Some(start + VT));
    assert_eq!(s.next_due(), None, "no wake-up left for it");
    assert_eq!(
        s.failed(a, start + Duration::from_secs(25), false),
        AfterFailure::Untracked,
        "a late answer for it changes nothing"
    );
    assert_eq!(s.next_due(), None);
}

#[test]
fn a_registration_says_when_it_falls_due() {
    let start = Instant::now();
    let mut s = schedule();
    let (_, due) = s.register(
        Arc::from("a"),
        Arc::from("a"),
        start + VT,
        start + MAX_VISIBILITY,
    );
    assert_eq!(due, start + Duration::from_secs(24));
    assert_eq!(s.next_due(), Some(due));
}
