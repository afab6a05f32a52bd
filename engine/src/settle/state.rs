//! The settlement state of one queue: the coalescer's lanes, the heartbeat's schedule and the
//! in-flight set, in one structure under one lock.
//!
//! Pure: no I/O, no clock (every method that needs the time takes `now`), no tasks. The driver
//! (`settle::run`) asks it for the calls to make ([`poll`](SettleState::poll)), sends them, and
//! feeds the answers back ([`finish`](SettleState::finish),
//! [`extended`](SettleState::extended), [`failed`](SettleState::failed)). Handlers' settlements
//! come in through [`settle`](SettleState::settle).
//!
//! A settlement and a due extension of the same message meet here and nowhere else: settling
//! takes the delivery out of the schedule and takes its extension out of the visibility lane
//! in the same step, and an extension already in a call keeps the message's receipt handle
//! busy, so the settlement goes out after its answer. No extension can reach SQS after the
//! settlement of its message.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::coalescer::{Batch, Coalescer, CoalescerConfig, Entry};
use super::heartbeat::{AfterFailure, HeartbeatConfig, Schedule};
use super::visibility::VisibilityTarget;
use crate::sqs::lane::Lane;

/// What an entry is for. `S` is what a handler's settlement carries (who waits for the answer).
#[derive(Debug)]
pub(crate) enum Token<S> {
    /// A handler's settlement.
    Settle(S),
    /// A heartbeat's extension of the delivery with this schedule key.
    Extend {
        key: u64,
        message_id: Arc<str>,
        /// It ends at the 12-hour window: the heartbeat stops after it.
        last: bool,
    },
}

/// A settlement refused because the queue's settlement has stopped; the entry is given back.
#[derive(Debug)]
pub(crate) struct Closed<S>(pub(crate) Entry<Token<S>>);

/// The settlement state of one queue.
#[derive(Debug)]
pub(crate) struct SettleState<S> {
    coalescer: Coalescer<Token<S>>,
    /// The heartbeat's schedule; `None` when the heartbeat is off.
    schedule: Option<Schedule>,
    /// When the driver will look again on its own: set each time it polls, for as long as it
    /// sleeps. Something due earlier must wake it.
    armed: Option<Instant>,
    /// Set once everything has been sent and answered after a drain: nothing more goes out.
    closed: bool,
    /// How long the oldest delete waits for the deliveries still out to fill its batch; `None`:
    /// it does not wait for them (see [`DeleteFill`]).
    delete_patience: Option<Duration>,
}

/// What an idle delete lane (no delete call in flight) does with a partial batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeleteFill {
    /// Sends it at once. For a FIFO queue, whose next message of a group may wait for the
    /// answer to its delete.
    AtOnce,
    /// Waits while the deliveries still out would fill it (see [`Coalescer::expect`]), the
    /// oldest entry up to a patience set by who awaits the answer: [`AWAITED_FILLING_WAITS`]
    /// times the batch wait when a handler may, [`DETACHED_FILLING_WAITS`] times it (at most
    /// [`DETACHED_FILLING_CAP`], never less than the other) when none does. Counts only the
    /// deliveries the heartbeat keeps: with the heartbeat off, idle batches go at once.
    FromDeliveriesOut(Answers),
}

/// How many batch waits the oldest delete waits for the deliveries still out while a handler
/// may be waiting for its answer. At a round trip of several milliseconds a call is nearly
/// always in flight, and at moderate load (about a thousand entries a second) the batch wait
/// alone sends batches of six to eight; twice as long fills them (io-50ms at 10 ms a call:
/// 0.210 calls per message, against 0.223 with one batch wait).
const AWAITED_FILLING_WAITS: u32 = 2;

/// How many batch waits the oldest delete waits for the deliveries still out when no handler
/// waits for its answer. Handlers that run in step (as many at once, each as long) settle in
/// bursts one handler's run apart, and the last partial batch of a burst would go alone:
/// sixty-four 50 ms handlers send seven deletes per 64 messages. Twenty batch waits (100 ms at
/// the default) carry it to the next burst.
const DETACHED_FILLING_WAITS: u32 = 20;

/// The longest a delete waits for the deliveries still out when no handler waits for its
/// answer (unless twice the batch wait is longer): the wait only delays when SQS learns of the
/// delete. It applies only while the heartbeat keeps the deliveries out, and the heartbeat
/// extends a delivery a margin of at least a second before its deadline, ten times this.
const DETACHED_FILLING_CAP: Duration = Duration::from_millis(100);

/// Whether the handler that settles a delivery may wait for SQS's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answers {
    /// It may: a [`Consumer`](crate::Consumer)'s deliveries, the broker's acks.
    Awaited,
    /// None waits: the engine settles on its own ([`Engine::run`] and [`Engine::run_batches`]).
    ///
    /// [`Engine::run`]: crate::Engine::run
    /// [`Engine::run_batches`]: crate::Engine::run_batches
    Detached,
}

impl DeleteFill {
    /// The rule for a queue whose settlements' answers are `answers`: at once on a FIFO queue,
    /// whose next message of a group may wait for the answer to a delete; otherwise waiting for
    /// the deliveries out, as long as `answers` allows.
    pub(crate) fn for_queue(fifo: bool, answers: Answers) -> Self {
        if fifo {
            Self::AtOnce
        } else {
            Self::FromDeliveriesOut(answers)
        }
    }

    /// How long the oldest delete waits for the deliveries still out, at a batch wait of
    /// `max_wait`; `None` when it does not wait for them.
    fn patience(self, max_wait: Duration) -> Option<Duration> {
        let awaited = max_wait * AWAITED_FILLING_WAITS;
        match self {
            Self::AtOnce => None,
            Self::FromDeliveriesOut(Answers::Awaited) => Some(awaited),
            Self::FromDeliveriesOut(Answers::Detached) => Some(
                (max_wait * DETACHED_FILLING_WAITS)
                    .min(DETACHED_FILLING_CAP)
                    .max(awaited),
            ),
        }
    }
}

impl<S> SettleState<S> {
    pub(crate) fn new(
        coalescer: CoalescerConfig,
        heartbeat: Option<HeartbeatConfig>,
        delete_fill: DeleteFill,
    ) -> Self {
        Self {
            coalescer: Coalescer::new(coalescer),
            schedule: heartbeat.map(Schedule::new),
            armed: None,
            closed: false,
            delete_patience: delete_fill.patience(coalescer.max_wait),
        }
    }

    /// Whether the driver must wake for something due at `at`.
    fn wakes(&self, at: Instant) -> bool {
        self.armed.is_none_or(|armed| at < armed)
    }

    /// Starts keeping a delivery invisible until `deadline` (nothing when the heartbeat is
    /// off). Returns its key, and whether the driver must wake.
    pub(crate) fn register(
        &mut self,
        receipt: Arc<str>,
        message_id: Arc<str>,
        deadline: Instant,
        window_end: Instant,
    ) -> (Option<u64>, bool) {
        let Some(schedule) = &mut self.schedule else {
            return (None, false);
        };
        let (key, due) = schedule.register(receipt, message_id, deadline, window_end);
        (Some(key), self.wakes(due))
    }

    /// The receipt handle of another delivery of `message_id` the heartbeat keeps than the one
    /// of `key` (for the planted defect
    /// [`DuplicateSettledAsOriginal`](crate::testing::Defect::DuplicateSettledAsOriginal)).
    #[cfg(feature = "testing")]
    pub(crate) fn other_receipt(&self, key: u64, message_id: &str) -> Option<Arc<str>> {
        self.schedule.as_ref()?.other_receipt(key, message_id)
    }

    /// Stops keeping a delivery invisible: takes it out of the schedule, and its extension out
    /// of the visibility lane if one waits there. Returns its deadline as last known.
    pub(crate) fn forget(&mut self, key: u64) -> Option<Instant> {
        let deadline = self.schedule.as_mut()?.deregister(key);
        self.coalescer.remove_pending(
            Lane::Visibility,
            |entry| matches!(entry.token, Token::Extend { key: k, .. } if k == key),
        );
        deadline
    }

    /// A handler's settlement: forgets the delivery `key` (see [`forget`](Self::forget)) and
    /// queues the entry `entry` makes of the delivery's deadline as last known on `lane`, in
    /// one step. Returns whether the driver must wake; or the entry back once the settlement
    /// has stopped.
    pub(crate) fn settle(
        &mut self,
        key: Option<u64>,
        lane: Lane,
        entry: impl FnOnce(Option<Instant>) -> Entry<Token<S>>,
    ) -> Result<bool, Closed<S>> {
        let entry = entry(key.and_then(|key| {
            if crate::defect!(HeartbeatKeptAfterSettle) {
                self.schedule
                    .as_ref()
                    .and_then(|schedule| schedule.deadline(key))
            } else {
                self.forget(key)
            }
        }));
        if self.closed {
            return Err(Closed(entry));
        }
        Ok(self.coalescer.push(lane, entry))
    }

    /// The batch calls to make at `now`: first the heartbeat's due extensions join the
    /// visibility lane (unless draining: a shutdown extends nothing more), then every batch the
    /// coalescer lets go. Records when the driver will look next.
    pub(crate) fn poll(&mut self, now: Instant) -> Vec<Batch<Token<S>>> {
        if !self.coalescer.is_draining()
            && let Some(schedule) = &mut self.schedule
        {
            let mut extensions = schedule.poll_due(now);
            if !extensions.is_empty() {
                // A visibility call goes out for these: fill its batch with extensions falling
                // due soon, rather than send them a moment later in a call of their own.
                let full = self.coalescer.max_batch();
                let pending = self.coalescer.pending(Lane::Visibility) + extensions.len();
                let room = (full - pending % full) % full;
                extensions.extend(schedule.poll_early(now, room));
            }
            for extension in extensions {
                self.coalescer.push(
                    Lane::Visibility,
                    Entry {
                        receipt: extension.receipt,
                        visibility: Some(VisibilityTarget {
                            delay: extension.extension,
                            window_end: extension.window_end,
                        }),
                        enqueued_at: now,
                        token: Token::Extend {
                            key: extension.key,
                            message_id: extension.message_id,
                            last: extension.last,
                        },
                    },
                );
            }
        }
        if let Some(patience) = self.delete_patience {
            self.coalescer
                .expect(self.schedule.as_ref().map_or(0, Schedule::len), patience);
        }
        let mut batches = Vec::new();
        while let Some(batch) = self.coalescer.poll_batch(now) {
            batches.push(batch);
        }
        self.armed = self.next_deadline();
        batches
    }

    /// When something falls due if nothing else happens: a lane's flush deadline or the next
    /// extension.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let extension = if self.coalescer.is_draining() {
            None
        } else {
            self.schedule.as_ref().and_then(Schedule::next_due)
        };
        match (self.coalescer.next_deadline(), extension) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether settlement is behind: see [`Coalescer::is_backlogged`].
    pub(crate) fn is_backlogged(&self) -> bool {
        self.coalescer.is_backlogged()
    }

    /// The batch calls take `rtt` to be answered, `queueing` at the server or not: see
    /// [`Coalescer::round_trip`].
    pub(crate) fn round_trip(&mut self, rtt: Duration, queueing: bool) {
        self.coalescer.round_trip(rtt, queueing);
    }

    /// A call of `lane` with these receipt handles was answered (or failed for good).
    pub(crate) fn finish<'a>(
        &mut self,
        lane: Lane,
        receipts: impl IntoIterator<Item = &'a Arc<str>>,
    ) {
        self.coalescer.finish(lane, receipts);
    }

    /// SQS applied an extension of `seconds` sent at `sent_at`. Returns whether the driver
    /// must wake for the next one.
    pub(crate) fn extended(
        &mut self,
        key: u64,
        sent_at: Instant,
        seconds: u32,
        last: bool,
    ) -> bool {
        let next = self
            .schedule
            .as_mut()
            .and_then(|schedule| schedule.extended(key, sent_at, seconds, last));
        next.is_some_and(|due| self.wakes(due))
    }

    /// An extension failed at `now`, `permanent`ly or after its call's retries: see
    /// [`Schedule::failed`]. Returns what becomes of the delivery (untracked when it was
    /// settled meanwhile: its extension failing is of no consequence), and whether the driver
    /// must wake for a retry.
    pub(crate) fn failed(
        &mut self,
        key: u64,
        now: Instant,
        permanent: bool,
    ) -> (AfterFailure, bool) {
        let after = self
            .schedule
            .as_mut()
            .map_or(AfterFailure::Untracked, |schedule| {
                schedule.failed(key, now, permanent)
            });
        let wake = match after {
            AfterFailure::Retry { due, .. } => self.wakes(due),
            AfterFailure::Untracked | AfterFailure::GaveUp => false,
        };
        (after, wake)
    }

    /// From now on every pending entry goes out at once, and no more extensions.
    pub(crate) fn drain(&mut self) {
        self.coalescer.drain();
    }

    /// Whether it is draining.
    #[cfg(test)]
    pub(crate) fn is_draining(&self) -> bool {
        self.coalescer.is_draining()
    }

    /// Nothing pending and nothing in flight: every entry queued so far is answered.
    pub(crate) fn is_idle(&self) -> bool {
        self.coalescer.is_idle()
    }

    /// Draining, with nothing pending and nothing in flight: marks it closed, so later
    /// settlements are refused at once. Returns whether it is.
    pub(crate) fn close_if_done(&mut self) -> bool {
        if self.coalescer.is_draining() && self.coalescer.is_idle() {
            self.closed = true;
        }
        self.closed
    }

    /// Deliveries the heartbeat keeps invisible.
    #[cfg(test)]
    pub(crate) fn tracked(&self) -> usize {
        self.schedule.as_ref().map_or(0, Schedule::len)
    }
}

#[cfg(test)]
mod tests;
