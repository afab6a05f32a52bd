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
use crate::lane::Lane;

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
    pub(crate) fn is_draining(&self) -> bool {
        self.coalescer.is_draining()
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
mod tests {
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
}
