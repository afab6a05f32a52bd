use std::cell::RefCell;
use std::rc::Rc;

use super::*;

/// A waiter that records its wake in a shared log, or no longer waits.
#[derive(Debug)]
struct Named {
    name: &'static str,
    waits: bool,
    woken: Rc<RefCell<Vec<&'static str>>>,
}

impl Waiter for Named {
    fn wake(self) -> bool {
        if self.waits {
            self.woken.borrow_mut().push(self.name);
        }
        self.waits
    }

    fn gone(&self) -> bool {
        !self.waits
    }
}

struct Line {
    woken: Rc<RefCell<Vec<&'static str>>>,
}

impl Line {
    fn new() -> Self {
        Self {
            woken: Rc::default(),
        }
    }

    fn waiter(&self, name: &'static str) -> Named {
        Named {
            name,
            waits: true,
            woken: Rc::clone(&self.woken),
        }
    }

    fn gone(&self, name: &'static str) -> Named {
        Named {
            waits: false,
            ..self.waiter(name)
        }
    }

    fn woken(&self) -> Vec<&'static str> {
        std::mem::take(&mut self.woken.borrow_mut())
    }
}

fn slots(count: usize) -> Freed {
    Freed {
        slots: count,
        ..Freed::default()
    }
}

fn ahead(count: usize) -> Freed {
    Freed {
        ahead: count,
        ..Freed::default()
    }
}

fn kib(count: usize) -> Freed {
    Freed {
        kib: count,
        ..Freed::default()
    }
}

#[test]
fn a_receiver_waits_while_the_messages_held_leave_no_room_for_a_batch() {
    let line = Line::new();
    let mut room = Room::new(20, 1024, 100, 10);
    assert!(room.ask_batch(line.waiter("a")).is_some());
    assert!(room.ask_batch(line.waiter("b")).is_some());
    assert!(
        room.ask_batch(line.waiter("c")).is_none(),
        "20 slots: two batches"
    );
    room.free(slots(9));
    assert!(line.woken().is_empty(), "nine slots are not a batch");
    room.free(slots(1));
    assert_eq!(line.woken(), ["c"]);
    assert_eq!(room.taken().slots, 20);
}

#[test]
fn a_receiver_waits_while_the_prefetch_is_full() {
    let line = Line::new();
    let mut room = Room::new(100, 1024, 10, 10);
    assert!(room.ask_batch(line.waiter("a")).is_some());
    assert!(room.ask_batch(line.waiter("b")).is_none());
    room.free(slots(10));
    assert!(
        line.woken().is_empty(),
        "settled, but its messages still wait to be handed out"
    );
    room.free(ahead(10));
    assert_eq!(line.woken(), ["b"]);
    assert_eq!(room.ahead_batches(), 0);
}

#[test]
fn receivers_get_their_batches_in_the_order_they_asked() {
    let line = Line::new();
    let mut room = Room::new(10, 1024, 100, 10);
    assert!(room.ask_batch(line.waiter("first")).is_some());
    for name in ["a", "b", "c"] {
        assert!(room.ask_batch(line.waiter(name)).is_none());
    }
    for expected in ["a", "b", "c"] {
        room.free(slots(10));
        assert_eq!(line.woken(), [expected]);
    }
    room.free(slots(10));
    assert!(
        room.ask_batch(line.waiter("d")).is_some(),
        "nobody waits: at once"
    );
}

#[test]
fn a_small_ask_for_bytes_does_not_pass_a_larger_one_before_it() {
    let line = Line::new();
    let mut room = Room::new(100, 100, 100, 10);
    assert!(room.ask_kib(line.waiter("held"), 90).is_some());
    assert!(room.ask_kib(line.waiter("large"), 50).is_none());
    assert!(
        room.ask_kib(line.waiter("small"), 5).is_none(),
        "five KiB are free, but the larger ask came first"
    );
    room.free(kib(45));
    assert_eq!(line.woken(), ["large", "small"]);
    assert_eq!(room.taken().kib, 100, "45 held, 50 and 5 taken");
}

#[test]
fn an_ask_for_more_than_all_the_bytes_takes_all_of_them() {
    let line = Line::new();
    let mut room = Room::new(100, 64, 100, 10);
    assert_eq!(room.kib_for(1_000), 64);
    assert!(room.ask_kib(line.waiter("huge"), 1_000).is_some());
    assert_eq!(room.taken().kib, 64);
    assert!(room.ask_kib(line.waiter("next"), 1).is_none());
    room.free(kib(64));
    assert_eq!(line.woken(), ["next"]);
}

#[test]
fn room_taken_for_a_waiter_that_left_goes_to_the_next() {
    let line = Line::new();
    let mut room = Room::new(10, 10, 100, 10);
    assert!(room.ask_batch(line.waiter("first")).is_some());
    assert!(room.ask_batch(line.gone("left")).is_none());
    assert!(room.ask_batch(line.waiter("next")).is_none());
    assert!(room.ask_kib(line.waiter("held"), 10).is_some());
    assert!(room.ask_kib(line.gone("left"), 10).is_none());
    assert!(room.ask_kib(line.waiter("next kib"), 10).is_none());
    room.free(Freed {
        slots: 10,
        kib: 10,
        ahead: 10,
    });
    assert_eq!(line.woken(), ["next", "next kib"]);
    assert_eq!(
        room.taken(),
        Freed {
            slots: 10,
            kib: 10,
            ahead: 10,
        }
    );
}

#[test]
fn every_limit_holds_at_least_one_ask() {
    let line = Line::new();
    let mut room = Room::new(3, 0, 0, 10);
    assert!(
        room.ask_batch(line.waiter("a")).is_some(),
        "a batch fits however small the settings"
    );
    assert!(room.ask_kib(line.waiter("b"), 5).is_some());
    assert_eq!(room.taken().kib, 1, "one KiB at the least");
}

#[test]
fn a_waiter_that_left_the_head_of_the_line_holds_nobody_up() {
    let line = Line::new();
    let mut room = Room::new(100, 10, 100, 10);
    assert!(room.ask_kib(line.waiter("held"), 6).is_some());
    assert!(room.ask_kib(line.gone("large, left"), 8).is_none());
    assert!(room.ask_kib(line.waiter("small"), 4).is_none());
    room.free(Freed::default());
    assert_eq!(line.woken(), ["small"]);
}
