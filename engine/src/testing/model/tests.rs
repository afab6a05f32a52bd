//! Unit tests of the model's messages: hand-out order, the FIFO group lock, redrive, the
//! visibility limit, look-ups.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{ErrorKind, Messages, Received, Standing};

const MINUTE: Duration = Duration::from_secs(60);

/// Receives up to `max` messages at `now`, in flight for a minute; their data.
fn receive(
    messages: &mut Messages<&'static str>,
    now: Instant,
    max: usize,
) -> Vec<Received<&'static str>> {
    let mut out = Vec::new();
    messages.receive(now, now + MINUTE, 0, max, &mut out);
    out
}

fn bodies(received: &[Received<&'static str>]) -> Vec<&'static str> {
    received.iter().map(|r| r.data).collect()
}

fn fifo_with(now: Instant, sends: &[(&'static str, &str)]) -> Messages<&'static str> {
    let mut messages = Messages::new(true);
    for (body, group) in sends {
        messages.store(*body, Some(Arc::from(*group)), now, Duration::ZERO);
    }
    messages
}

#[test]
fn a_standard_queue_hands_out_a_message_visible_again_before_newer_ones() {
    let now = Instant::now();
    let mut messages = Messages::new(false);
    for body in ["m0", "m1", "m2"] {
        messages.store(body, None, now, Duration::ZERO);
    }
    let first = receive(&mut messages, now, 1);
    assert_eq!(bodies(&first), ["m0"]);
    messages
        .change_visibility(first[0].seq, first[0].receive_count, now, Duration::ZERO)
        .expect("in flight");
    assert_eq!(bodies(&receive(&mut messages, now, 10)), ["m0", "m1", "m2"]);
    assert_eq!(messages.visible_index_len(), 0);
}

#[test]
fn a_fifo_queue_hands_out_a_groups_run_before_the_next_group() {
    let now = Instant::now();
    let mut messages = fifo_with(
        now,
        &[
            ("a1", "a"),
            ("b1", "b"),
            ("a2", "a"),
            ("b2", "b"),
            ("c1", "c"),
        ],
    );
    assert_eq!(
        bodies(&receive(&mut messages, now, 3)),
        ["a1", "a2", "b1"],
        "group a's run, then the group with the next oldest message"
    );
    assert_eq!(
        bodies(&receive(&mut messages, now, 10)),
        ["c1"],
        "b has a message in flight"
    );
}

#[test]
fn a_fifo_group_with_any_message_in_flight_hands_out_nothing() {
    let now = Instant::now();
    let mut messages = fifo_with(now, &[("a1", "a"), ("a2", "a")]);
    let both = receive(&mut messages, now, 10);
    assert_eq!(bodies(&both), ["a1", "a2"]);
    // a1 back, a2 still in flight: the group stays locked.
    messages
        .change_visibility(both[0].seq, both[0].receive_count, now, Duration::ZERO)
        .expect("in flight");
    assert!(receive(&mut messages, now, 10).is_empty());
    let mut receivable = Vec::new();
    messages.for_each_receivable(|seq, _| receivable.push(seq));
    assert!(receivable.is_empty(), "{receivable:?}");
    assert_eq!(
        messages.delete(both[1].seq, both[1].receive_count),
        Some("a2")
    );
    messages.for_each_receivable(|seq, _| receivable.push(seq));
    assert_eq!(receivable, [both[0].seq]);
    assert_eq!(bodies(&receive(&mut messages, now, 10)), ["a1"]);
}

#[test]
fn a_delayed_message_stops_its_groups_run_and_counts_as_delayed() {
    let now = Instant::now();
    let mut messages = Messages::new(true);
    messages.store("a1", Some(Arc::from("a")), now, MINUTE);
    messages.store("a2", Some(Arc::from("a")), now, Duration::ZERO);
    let counts = messages.counts();
    assert_eq!((counts.visible, counts.delayed), (1, 1));
    assert!(receive(&mut messages, now, 10).is_empty());
    assert_eq!(
        bodies(&receive(&mut messages, now + MINUTE, 10)),
        ["a1", "a2"]
    );
}

#[test]
fn a_receive_moves_out_a_message_that_spent_its_receives() {
    let now = Instant::now();
    let mut messages = Messages::new(false);
    messages.set_max_receive_count(Some(2));
    messages.store("spent", None, now, Duration::ZERO);
    messages.store("next", None, now, Duration::ZERO);
    for _ in 0..2 {
        let first = receive(&mut messages, now, 1);
        assert_eq!(bodies(&first), ["spent"]);
        messages
            .change_visibility(first[0].seq, first[0].receive_count, now, Duration::ZERO)
            .expect("in flight");
    }
    assert!(
        messages.take_redriven().is_empty(),
        "moved on a receive only"
    );
    assert_eq!(
        bodies(&receive(&mut messages, now, 1)),
        ["next"],
        "the spent message is moved, not handed out"
    );
    let moved = messages.take_redriven();
    assert_eq!(moved.len(), 1);
    assert_eq!((moved[0].data, moved[0].receive_count), ("spent", 2));
    assert_eq!(messages.counts().visible, 0);

    let mut dead_letter = Messages::new(false);
    for message in moved {
        dead_letter.store_redriven(message, now);
    }
    let again = receive(&mut dead_letter, now, 1);
    assert_eq!(
        again[0].receive_count, 3,
        "the receive count moves with the message"
    );
}

#[test]
fn a_visibility_past_twelve_hours_from_the_receive_is_refused() {
    let now = Instant::now();
    let mut messages = Messages::new(false);
    messages.store("one", None, now, Duration::ZERO);
    let received = receive(&mut messages, now, 1);
    let (seq, count) = (received[0].seq, received[0].receive_count);
    let hour = Duration::from_secs(3_600);
    messages
        .change_visibility(seq, count, now, 2 * hour)
        .expect("within twelve hours");
    let refused = messages
        .change_visibility(seq, count, now + hour, 12 * hour)
        .expect_err("thirteen hours after the receive");
    assert_eq!(refused.kind, ErrorKind::InvalidParameterValue);
    messages
        .change_visibility(seq, count, now + hour, 11 * hour)
        .expect("twelve hours after the receive");
}

#[test]
fn a_stale_receive_deletes_nothing_and_changes_nothing() {
    let now = Instant::now();
    let mut messages = Messages::new(false);
    let seq = messages.store("one", None, now, Duration::ZERO);
    let first = receive(&mut messages, now, 1);
    messages
        .change_visibility(seq, first[0].receive_count, now, Duration::ZERO)
        .expect("in flight");
    let second = receive(&mut messages, now, 1);
    assert_eq!(second[0].receive_count, 2);
    assert!(!messages.in_flight(seq, 1));
    assert!(messages.in_flight(seq, 2));
    assert_eq!(messages.delete(seq, 1), None);
    let stale = messages
        .change_visibility(seq, 1, now, MINUTE)
        .expect_err("stale");
    assert_eq!(stale.kind, ErrorKind::ReceiptHandleIsInvalid);
    let message = messages.get(seq).expect("still there");
    assert_eq!((message.data, message.receive_count), (&"one", 2));
    assert_eq!(message.standing, Standing::InFlight);
    messages.release_due(now + MINUTE);
    let not_in_flight = messages
        .change_visibility(seq, 2, now + MINUTE, MINUTE)
        .expect_err("visible again");
    assert_eq!(not_in_flight.kind, ErrorKind::MessageNotInflight);
    assert_eq!(messages.delete(seq, 2), Some("one"));
    assert!(messages.get(seq).is_none());
    assert_eq!(messages.iter().count(), 0);
}

#[test]
fn messages_are_looked_up_and_changed_by_sequence_number() {
    let now = Instant::now();
    let mut messages = Messages::new(false);
    let first = messages.store("one", None, now, Duration::ZERO);
    let second = messages.store("two", None, now, MINUTE);
    if let Some(data) = messages.get_mut(first) {
        *data = "uno";
    }
    let seen: Vec<(u64, &str, Standing)> = messages
        .in_send_order()
        .into_iter()
        .map(|m| (m.seq, *m.data, m.standing))
        .collect();
    assert_eq!(
        seen,
        [
            (first, "uno", Standing::Visible),
            (second, "two", Standing::Delayed)
        ]
    );
    for data in messages.iter_mut() {
        *data = "same";
    }
    assert!(messages.iter().all(|m| *m.data == "same"));
}
