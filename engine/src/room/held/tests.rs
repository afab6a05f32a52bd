use std::pin::pin;
use std::task::{Context, Poll, Waker};

use super::*;
use crate::metrics::StatsCells;

fn held(slots: usize, kib: usize, ahead: usize, batch: usize) -> Arc<HeldRoom> {
    let metrics = QueueMetrics::new("room-test", Arc::new(StatsCells::default()));
    HeldRoom::new(slots, kib, ahead, batch, Arc::new(metrics))
}

/// Polls `future` once, with a waker that does nothing.
fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn what_a_batch_does_not_hand_on_goes_back_with_it() {
    let held = held(20, 64, 20, 10);
    let Poll::Ready(mut room) = poll_once(pin!(held.batch())) else {
        panic!("room for a batch");
    };
    let slots: Vec<Slot> = (0..3).map(|_| room.slot()).collect();
    room.free_slots();
    room.keep_ahead(3);
    assert_eq!(
        held.taken(),
        Freed {
            slots: 3,
            kib: 0,
            ahead: 10,
        },
        "the batch keeps its room until it is dropped"
    );
    drop(room);
    assert_eq!(held.taken().ahead, 3, "three wait to be handed out");
    drop(slots);
    held.left_prefetch(3);
    assert_eq!(held.taken(), Freed::default());
}

#[test]
fn a_wait_dropped_after_its_grant_gives_the_room_back() {
    let held = held(10, 64, 100, 10);
    let Poll::Ready(first) = poll_once(pin!(held.batch())) else {
        panic!("room for a batch");
    };
    {
        let mut waiting = pin!(held.batch());
        assert!(poll_once(waiting.as_mut()).is_pending(), "no room left");
        drop(first);
        assert_eq!(held.taken().slots, 10, "taken for the waiter");
    }
    assert_eq!(
        held.taken(),
        Freed::default(),
        "the waiter left without its room"
    );
}

#[test]
fn a_wait_dropped_before_its_grant_takes_nothing() {
    let held = held(64, 10, 100, 10);
    let Poll::Ready(first) = poll_once(pin!(held.kib(10))) else {
        panic!("room for ten KiB");
    };
    {
        let mut waiting = pin!(held.kib(4));
        assert!(poll_once(waiting.as_mut()).is_pending(), "no room left");
    }
    let mut next = pin!(held.kib(6));
    assert!(poll_once(next.as_mut()).is_pending());
    drop(first);
    let Poll::Ready(mut next) = poll_once(next) else {
        panic!("the wait that left passed its turn on");
    };
    assert_eq!(held.taken().kib, 6);
    let body = next.body(4);
    drop(next);
    assert_eq!(held.taken().kib, 4, "the body keeps its share");
    drop(body);
    assert_eq!(held.taken(), Freed::default());
}
