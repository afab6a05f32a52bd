//! The batching core: entries in, batch calls out.
//!
//! A pure state machine. A [`Batcher`] holds the entries waiting for one kind of batch call to
//! one place and decides when a batch goes out; it does no I/O and reads no clock: the caller
//! passes `now` in. It flushes a batch:
//! - when the waiting entries fill a call ([`FlushReason::Full`]): a full batch of them, or
//!   whatever else its [`Rule`] counts as full;
//! - at once when no call is in flight ([`FlushReason::Idle`]), so a lone entry takes one
//!   round trip, unless the entries it [`expect`](Batcher::expect)s would fill the batch: then
//!   it waits for them;
//! - when its oldest entry that may go out has waited `max_wait` ([`FlushReason::Deadline`]),
//!   or the patience its caller gave while the entries it expects would fill the batch;
//! - at once while draining for shutdown ([`FlushReason::Shutdown`]);
//!
//! and never while `max_in_flight` of its calls are in flight. What may share a call differs
//! from one kind of call to another, and is the batcher's [`Rule`]: distinct receipt handles,
//! one call in flight per handle on an ordered lane, for settlement
//! ([`crate::settle::coalescer`]); a byte budget per call for publishing
//! ([`budget::ByteBudget`]).
//!
//! One driver runs a batcher's state and its calls: [`drive`], its loop and each batch's call
//! answered entry by entry.

pub(crate) mod budget;
pub(crate) mod drive;
mod reason;
mod rule;

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

pub(crate) use reason::FlushReason;
pub(crate) use rule::{Admit, Rule};

use crate::limits::MAX_BATCH_ENTRIES;

/// An entry waiting in a [`Batcher`].
pub(crate) trait Queued {
    /// When it began to wait.
    fn enqueued_at(&self) -> Instant;
}

/// A batcher's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchConfig {
    /// Entries in a full batch, 1..=[`MAX_BATCH_ENTRIES`].
    pub(crate) max_batch: usize,
    /// How long the oldest entry may wait while a call is in flight (longer while the entries
    /// expected would fill its batch: see [`Batcher::expect`]).
    pub(crate) max_wait: Duration,
    /// Calls in flight at once, at most.
    pub(crate) max_in_flight: usize,
}

/// The entries waiting for one kind of batch call to one place, and the calls in flight.
#[derive(Debug)]
pub(crate) struct Batcher<E, R> {
    config: BatchConfig,
    rule: R,
    pending: VecDeque<E>,
    in_flight: usize,
    draining: bool,
    /// Entries expected soon beyond those waiting (see [`expect`](Self::expect)).
    expected: usize,
    /// How long the oldest entry waits while the entries expected would fill its batch.
    patience: Duration,
}

impl<E: Queued, R: Rule<E>> Batcher<E, R> {
    pub(crate) fn new(config: BatchConfig, rule: R) -> Self {
        Self {
            config: BatchConfig {
                max_batch: config.max_batch.clamp(1, MAX_BATCH_ENTRIES),
                max_in_flight: config.max_in_flight.max(1),
                ..config
            },
            rule,
            pending: VecDeque::new(),
            in_flight: 0,
            draining: false,
            expected: 0,
            patience: Duration::ZERO,
        }
    }

    /// `entries` more are expected soon, beyond those waiting: while they would fill the
    /// batch, an idle batcher waits for them instead of sending a partial batch at once, and
    /// the oldest entry waits up to `patience` (`max_wait` if that is longer) rather than
    /// `max_wait`. Zero entries, the start, never waits.
    pub(crate) fn expect(&mut self, entries: usize, patience: Duration) {
        self.expected = entries;
        self.patience = patience;
    }

    /// Allows `max_in_flight` calls in flight from now on (at least one).
    pub(crate) fn set_max_in_flight(&mut self, max_in_flight: usize) {
        self.config.max_in_flight = max_in_flight.max(1);
    }

    fn has_room(&self) -> bool {
        self.in_flight < self.config.max_in_flight
    }

    fn is_full(&self) -> bool {
        self.pending.len() >= self.config.max_batch || self.rule.is_full()
    }

    /// How long the oldest entry waits for a fuller batch: `max_wait`, or the patience given
    /// while the entries [`expect`](Self::expect)ed would fill the batch.
    fn wait(&self) -> Duration {
        if self.pending.len() + self.expected >= self.config.max_batch {
            self.patience.max(self.config.max_wait)
        } else {
            self.config.max_wait
        }
    }

    /// The oldest entry that may go out now.
    fn oldest_ready(&self) -> Option<&E> {
        self.pending.iter().find(|entry| self.rule.ready(entry))
    }

    /// Adds an entry. Returns whether the driver must look now: a batch is due, or the flush
    /// deadline moved earlier.
    pub(crate) fn push(&mut self, entry: E) -> bool {
        let was_empty = self.pending.is_empty();
        self.rule.pushed(&entry);
        self.pending.push_back(entry);
        // With no room for a call nothing goes out before one finishes, and finishing wakes the
        // driver.
        self.has_room() && (was_empty || self.in_flight == 0 || self.is_full())
    }

    /// Puts `entries` back at the front, in their order, ahead of those waiting: for entries
    /// of a call that must go again in other calls. The driver wakes when the call finishes.
    pub(crate) fn push_front(&mut self, entries: Vec<E>) {
        for entry in entries.into_iter().rev() {
            self.rule.pushed(&entry);
            self.pending.push_front(entry);
        }
    }

    /// [`push`](Self::push), unless draining: then the entry is handed back.
    pub(crate) fn offer(&mut self, entry: E) -> Result<bool, E> {
        if self.draining {
            return Err(entry);
        }
        Ok(self.push(entry))
    }

    /// The next batch due at `now`, and why, if any. Call it until it answers `None`; each
    /// batch is a call in flight until [`finish`](Self::finish).
    pub(crate) fn poll(&mut self, now: Instant) -> Option<(FlushReason, Vec<E>)> {
        if !self.has_room() {
            return None;
        }
        let deadline = self.oldest_ready()?.enqueued_at() + self.wait();
        let reason = if self.is_full() {
            FlushReason::Full
        } else if self.in_flight == 0 && self.pending.len() + self.expected < self.config.max_batch
        {
            FlushReason::Idle
        } else if deadline <= now {
            FlushReason::Deadline
        } else if self.draining {
            FlushReason::Shutdown
        } else {
            return None;
        };
        let entries = self.take();
        if entries.is_empty() {
            return None;
        }
        self.rule.sent(&entries);
        self.in_flight += 1;
        Some((reason, entries))
    }

    /// Takes up to a full batch from the front, as the rule admits: the entries it skips keep
    /// their place.
    fn take(&mut self) -> Vec<E> {
        let max = self.config.max_batch;
        let mut batch = Vec::with_capacity(max.min(self.pending.len()));
        let mut index = 0;
        while batch.len() < max && index < self.pending.len() {
            match self.rule.admits(&batch, &self.pending[index]) {
                Admit::Take => {
                    if let Some(entry) = self.pending.remove(index) {
                        self.rule.left(&entry);
                        batch.push(entry);
                    }
                }
                Admit::Skip => index += 1,
                Admit::Stop => break,
            }
        }
        batch
    }

    /// When the next batch falls due if nothing else happens: the oldest ready entry's
    /// deadline, when there is room for a call. `None` when only a push or a finished call can
    /// make a batch due.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        if !self.has_room() {
            return None;
        }
        self.oldest_ready()
            .map(|oldest| oldest.enqueued_at() + self.wait())
    }

    /// A call has finished (whatever its answer). What it held back under the rule is the
    /// rule's to release ([`rule_mut`](Self::rule_mut)).
    pub(crate) fn finish(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// The rule, to tell it what a finished call held.
    pub(crate) fn rule_mut(&mut self) -> &mut R {
        &mut self.rule
    }

    /// Takes out the waiting entries (not in a call) for which `stale` holds.
    pub(crate) fn remove_pending(&mut self, mut stale: impl FnMut(&E) -> bool) {
        let rule = &mut self.rule;
        self.pending.retain(|entry| {
            let remove = stale(entry);
            if remove {
                rule.left(entry);
            }
            !remove
        });
    }

    /// From now on every waiting entry is due at once.
    pub(crate) fn drain(&mut self) {
        self.draining = true;
    }

    /// Whether it is draining.
    pub(crate) fn is_draining(&self) -> bool {
        self.draining
    }

    /// No entry waiting and no call in flight.
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.in_flight == 0
    }

    /// Draining, with nothing waiting and nothing in flight.
    #[cfg_attr(
        not(feature = "ruststream"),
        allow(dead_code, reason = "only the broker's publishing drains to the end")
    )]
    pub(crate) fn is_done(&self) -> bool {
        self.draining && self.is_idle()
    }

    /// Entries in a full batch.
    pub(crate) fn max_batch(&self) -> usize {
        self.config.max_batch
    }

    /// Entries waiting.
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Calls in flight.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }
}
