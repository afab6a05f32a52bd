//! The room of one queue's consumer as a pure state: how many messages it holds (each until
//! its settlement is answered), their bytes, and how many of them wait received and not yet
//! handed out (the prefetch); and who waits for room, in the order they asked. No I/O, no
//! clock, no tasks: it takes what is asked and what is freed, and names the waiters it let
//! through. The shell that shares it between the receivers and the deliveries is `held.rs`.
//!
//! Two kinds of asks wait, each kind in its own line, served first come first served:
//!
//! - a receiver's, before its call: room in the prefetch and among the messages held for a
//!   whole receive batch, so that it never receives more than can start soon;
//! - a receive's, after its answer: its messages' KiB among the bytes held, waited for with the
//!   messages in hand (so the bytes may be passed by what the receives in flight bring, never
//!   by more). An ask is cut to the whole of the bytes, so that it can always be met.
//!
//! An ask is granted only when nobody of its line waits before it: a small ask does not pass a
//! larger one that came first, so no receiver waits forever.

use std::collections::VecDeque;

/// Someone waiting for room: told when it is theirs.
pub(crate) trait Waiter {
    /// Tells the waiter that the room it asked for is its own now. Returns `false` when it no
    /// longer waits: the room then goes back, to whoever waits next.
    fn wake(self) -> bool;

    /// Whether the waiter stopped waiting: it then leaves the line without taking room.
    fn gone(&self) -> bool;
}

/// How much of one kind of room is taken, out of how much.
#[derive(Debug, Clone, Copy)]
struct Limit {
    cap: usize,
    used: usize,
}

impl Limit {
    fn new(cap: usize) -> Self {
        Self { cap, used: 0 }
    }

    fn fits(self, wanted: usize) -> bool {
        self.used.saturating_add(wanted) <= self.cap
    }

    fn take(&mut self, count: usize) {
        self.used += count;
    }

    /// Gives `count` back. More than is taken is a bookkeeping error of the shell's: it is
    /// caught in tests and clamped otherwise, so that the room never grows past its cap.
    fn free(&mut self, count: usize) {
        debug_assert!(count <= self.used, "freed {count} of {} taken", self.used);
        self.used = self.used.saturating_sub(count);
    }

    fn available(self) -> usize {
        self.cap.saturating_sub(self.used)
    }
}

/// Room given back: any mix of the three kinds, at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Freed {
    /// Messages held.
    pub(crate) slots: usize,
    /// KiB of the messages held.
    pub(crate) kib: usize,
    /// Messages received and not yet handed out.
    pub(crate) ahead: usize,
}

/// The room of one queue's consumer, and its waiters (see the module docs).
#[derive(Debug)]
pub(crate) struct Room<W> {
    slots: Limit,
    kib: Limit,
    ahead: Limit,
    /// The messages of one receive batch: what a receiver asks for, of `slots` and of `ahead`.
    batch: usize,
    /// Receivers waiting for a batch's room.
    batches: VecDeque<W>,
    /// Receives waiting for their messages' KiB, with how many.
    bodies: VecDeque<(W, usize)>,
}

impl<W: Waiter> Room<W> {
    /// Room for `slots` messages held, `kib` KiB of them and `ahead` messages waiting received,
    /// asked for `batch` messages at a time. Each is at least one batch (the bytes at least one
    /// KiB), so that every ask can be met.
    pub(crate) fn new(slots: usize, kib: usize, ahead: usize, batch: usize) -> Self {
        let batch = batch.max(1);
        Self {
            slots: Limit::new(slots.max(batch)),
            kib: Limit::new(kib.max(1)),
            ahead: Limit::new(ahead.max(batch)),
            batch,
            batches: VecDeque::new(),
            bodies: VecDeque::new(),
        }
    }

    /// The messages of one receive batch.
    pub(crate) fn batch(&self) -> usize {
        self.batch
    }

    /// A receiver asks for a batch's room, in the prefetch and among the messages held: taken
    /// at once when it is there and no receiver waits before it (the waiter comes back, not
    /// woken); otherwise `waiter` waits in line and is woken when it is taken for it.
    pub(crate) fn ask_batch(&mut self, waiter: W) -> Option<W> {
        if self.batches.is_empty() && self.batch_fits() {
            self.take_batch();
            return Some(waiter);
        }
        self.batches.push_back(waiter);
        None
    }

    /// The KiB an ask for `wanted` takes: all of the bytes at the most.
    pub(crate) fn kib_for(&self, wanted: usize) -> usize {
        wanted.min(self.kib.cap)
    }

    /// A receive asks for its messages' KiB (cut by [`kib_for`](Self::kib_for)): taken at once
    /// when they are there and no receive waits before it (the waiter comes back, not woken);
    /// otherwise
    /// `waiter` waits in line and is woken when they are taken for it.
    pub(crate) fn ask_kib(&mut self, waiter: W, wanted: usize) -> Option<W> {
        let wanted = self.kib_for(wanted);
        if self.bodies.is_empty() && self.kib.fits(wanted) {
            self.kib.take(wanted);
            return Some(waiter);
        }
        self.bodies.push_back((waiter, wanted));
        None
    }

    /// Gives room back, and takes it for the waiters it lets through, first come first served
    /// in each line; they are woken here. Called with nothing freed, it lets through whoever a
    /// waiter that left the head of a line held up.
    pub(crate) fn free(&mut self, freed: Freed) {
        self.slots.free(freed.slots);
        self.kib.free(freed.kib);
        self.ahead.free(freed.ahead);
        self.let_through();
    }

    /// Room for how many receive batches the prefetch has now.
    pub(crate) fn ahead_batches(&self) -> usize {
        self.ahead.available() / self.batch
    }

    /// How much of each kind is taken now.
    #[cfg(test)]
    pub(crate) fn taken(&self) -> Freed {
        Freed {
            slots: self.slots.used,
            kib: self.kib.used,
            ahead: self.ahead.used,
        }
    }

    fn batch_fits(&self) -> bool {
        self.slots.fits(self.batch) && self.ahead.fits(self.batch)
    }

    fn take_batch(&mut self) {
        self.slots.take(self.batch);
        self.ahead.take(self.batch);
    }

    /// Wakes the waiters at the head of each line whose room is there, taking it for them; a
    /// waiter that no longer waits leaves the line, or gives the room back at once.
    fn let_through(&mut self) {
        while self.batches.front().is_some_and(W::gone) {
            self.batches.pop_front();
        }
        while self.bodies.front().is_some_and(|(waiter, _)| waiter.gone()) {
            self.bodies.pop_front();
        }
        while self.batch_fits()
            && let Some(waiter) = self.batches.pop_front()
        {
            self.take_batch();
            if !waiter.wake() {
                self.slots.free(self.batch);
                self.ahead.free(self.batch);
            }
        }
        while let Some(&(_, wanted)) = self.bodies.front()
            && self.kib.fits(wanted)
        {
            let Some((waiter, wanted)) = self.bodies.pop_front() else {
                break;
            };
            self.kib.take(wanted);
            if !waiter.wake() {
                self.kib.free(wanted);
            }
        }
    }
}

#[cfg(test)]
mod tests;
