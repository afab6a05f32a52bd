//! The heartbeat's schedule: keeps in-flight messages invisible while their handlers run.
//!
//! One [`Schedule`] per queue, inside the queue's settlement state, holds every unsettled
//! delivery with its visibility deadline. When a deadline comes within the margin, the state
//! puts an extension on the coalescer's visibility lane, so extensions of messages that settle
//! independently share `ChangeMessageVisibilityBatch` calls with each other and with retries.
//! No extension reaches past 12 hours from the receive: the last one ends there.
//!
//! An extension that fails transiently (its call throttled or failing past the call's retry
//! budget) is tried again, a short backoff later (see [`retry_delay`]), for as long as the
//! delivery's known deadline has not passed: a brownout longer than one call's retries does
//! not end the heartbeat. Only once the deadline has come, when SQS may already have handed
//! the message out again, does the heartbeat give the delivery up. SQS refusing the entry
//! itself for good (a receipt handle it no longer knows) gives it up at once: sending the same
//! handle again cannot mend that. A whole call refused (access denied, expired credentials) is
//! tried again like a transient failure: it may be mended before the deadline, which bounds
//! the tries (each failed call is logged as it fails).
//!
//! [`Schedule`] is pure: no I/O, no clock; `now` is passed in.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::visibility::visibility_seconds;

/// How the heartbeat extends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeartbeatConfig {
    /// The visibility each extension sets, from the time of the call.
    pub(crate) extension: Duration,
    /// How long before its deadline a message is extended.
    pub(crate) margin: Duration,
    /// Messages due within this much after the first due one are extended with it, so that
    /// their extensions share calls.
    pub(crate) slack: Duration,
}

impl HeartbeatConfig {
    /// The heartbeat for a visibility timeout: a margin of a fifth of it (at least 1 s, at
    /// most half the timeout and 60 s), a slack of half the margin, and extensions of the
    /// timeout's length, or of five margins where that is longer. Each extension buys its
    /// length less the margin: with a short timeout (2 s, whose margin is 1 s) extensions of
    /// the timeout would come every second, two per timeout; five margins keep them to at
    /// most one per four margins. `None` for a visibility timeout under 2 s, too short to
    /// extend in time.
    pub(crate) fn for_visibility(visibility: Duration, margin: Option<Duration>) -> Option<Self> {
        if visibility < Duration::from_secs(2) {
            return None;
        }
        let margin = margin
            .unwrap_or_else(|| {
                (visibility / 5).clamp(Duration::from_secs(1), Duration::from_secs(60))
            })
            .min(visibility / 2);
        Some(Self {
            extension: visibility.max(margin.saturating_mul(5)),
            margin,
            slack: margin / 2,
        })
    }
}

/// Where a tracked delivery is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for its next extension to fall due.
    Waiting,
    /// An extension was asked for and has no answer yet.
    Extending,
    /// No more extensions: the last one reached the 12-hour window's end, or the heartbeat
    /// gave the delivery up (see [`Schedule::failed`]).
    Done,
}

#[derive(Debug)]
struct Tracked {
    receipt: Arc<str>,
    message_id: Arc<str>,
    deadline: Instant,
    window_end: Instant,
    phase: Phase,
    /// When its next extension falls due; its place in [`Schedule::due`] while
    /// [`Phase::Waiting`].
    due: Instant,
    /// Extensions that failed in a row since the last applied one.
    failures: u32,
}

/// What the heartbeat does for a delivery whose extension failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    /// Settled (or dropped) meanwhile: no longer tracked, nothing to do.
    Untracked,
    /// It tries again at `due`, which is no later than the known `deadline`.
    Retry { due: Instant, deadline: Instant },
    /// No more extensions: the known deadline has passed, or SQS refused for good. The
    /// message may be handed out again while its handler runs.
    GaveUp,
}

/// The first delay before an extension that failed is tried again, doubling with each failure
/// in a row (see [`retry_delay`]).
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// How long after its `failures`-th failure in a row (1 for the first) an extension is tried
/// again, with a heartbeat margin of `margin`: one second, doubling, at most a quarter of the
/// margin (never under a second, SQS's unit of visibility), so that several tries fit between
/// the due time and the deadline, and a brownout costs a call every few seconds, not a busy
/// loop. Each try is a call with its own retries besides.
pub(crate) fn retry_delay(failures: u32, margin: Duration) -> Duration {
    let ceiling = (margin / 4).max(FIRST_RETRY);
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_RETRY.saturating_mul(1 << doublings).min(ceiling)
}

/// An extension to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Extension {
    pub(crate) key: u64,
    pub(crate) receipt: Arc<str>,
    pub(crate) message_id: Arc<str>,
    /// The visibility asked for.
    pub(crate) extension: Duration,
    pub(crate) window_end: Instant,
    /// It ends at the 12-hour window's end: no extension follows it.
    pub(crate) last: bool,
}

/// Hashes the schedule's keys: counters the schedule hands out itself, so no caller can choose
/// them to collide, and a multiply spreads consecutive keys over the table. Cheaper per message
/// than the default SipHash.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = (self.0 ^ key).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The in-flight deliveries of one queue and their visibility deadlines.
#[derive(Debug)]
pub(crate) struct Schedule {
    config: HeartbeatConfig,
    next_key: u64,
    tracked: HashMap<u64, Tracked, BuildHasherDefault<KeyHasher>>,
    /// `(due, key)` for every delivery in [`Phase::Waiting`], as in its [`Tracked::due`].
    due: BTreeSet<(Instant, u64)>,
}

impl Schedule {
    pub(crate) fn new(config: HeartbeatConfig) -> Self {
        Self {
            config,
            next_key: 0,
            tracked: HashMap::default(),
            due: BTreeSet::new(),
        }
    }

    fn due_at(&self, deadline: Instant) -> Instant {
        deadline.checked_sub(self.config.margin).unwrap_or(deadline)
    }

    /// Starts tracking a delivery invisible until `deadline`. Returns its key, and when its
    /// first extension falls due.
    pub(crate) fn register(
        &mut self,
        receipt: Arc<str>,
        message_id: Arc<str>,
        deadline: Instant,
        window_end: Instant,
    ) -> (u64, Instant) {
        let key = self.next_key;
        self.next_key += 1;
        let due = self.due_at(deadline);
        self.tracked.insert(
            key,
            Tracked {
                receipt,
                message_id,
                deadline,
                window_end,
                phase: Phase::Waiting,
                due,
                failures: 0,
            },
        );
        self.due.insert((due, key));
        (key, due)
    }

    /// Stops tracking a delivery (settled, or dropped unsettled). Returns its deadline as last
    /// known.
    pub(crate) fn deregister(&mut self, key: u64) -> Option<Instant> {
        let tracked = self.tracked.remove(&key)?;
        if tracked.phase == Phase::Waiting {
            self.due.remove(&(tracked.due, key));
        }
        Some(tracked.deadline)
    }

    /// The extensions due at `now`, and with them those due within the slack after it; none
    /// while none is due (the slack counts from a due one, so that a retry's backoff is kept
    /// whenever the driver looks). Each is marked as extending until
    /// [`extended`](Self::extended) or [`failed`](Self::failed).
    pub(crate) fn poll_due(&mut self, now: Instant) -> Vec<Extension> {
        let mut extensions = Vec::new();
        if self.next_due().is_none_or(|due| due > now) {
            return extensions;
        }
        self.take_due(now, now + self.config.slack, usize::MAX, &mut extensions);
        extensions
    }

    /// Up to `room` more extensions, of deliveries due within one margin after `now`: those
    /// that would fall due soon, taken early to fill a batch call that goes out anyway. An
    /// early extension never shortens a visibility: the deadline it replaces is at most two
    /// margins away, and an extension reaches a whole visibility timeout (at least two
    /// margins) ahead.
    pub(crate) fn poll_early(&mut self, now: Instant, room: usize) -> Vec<Extension> {
        let mut extensions = Vec::new();
        self.take_due(now, now + self.config.margin, room, &mut extensions);
        extensions
    }

    /// Moves up to `max` deliveries due by `horizon` to [`Phase::Extending`], in order of due.
    fn take_due(
        &mut self,
        now: Instant,
        horizon: Instant,
        max: usize,
        extensions: &mut Vec<Extension>,
    ) {
        let wanted = extensions.len().saturating_add(max);
        while extensions.len() < wanted {
            let Some(&(due, key)) = self.due.first() else {
                break;
            };
            if due > horizon {
                break;
            }
            self.due.pop_first();
            let Some(tracked) = self.tracked.get_mut(&key) else {
                continue;
            };
            let (seconds, shortened) =
                visibility_seconds(self.config.extension, tracked.window_end, now);
            if seconds == 0 {
                // The window has ended: SQS allows no more.
                tracked.phase = Phase::Done;
                continue;
            }
            tracked.phase = Phase::Extending;
            extensions.push(Extension {
                key,
                receipt: Arc::clone(&tracked.receipt),
                message_id: Arc::clone(&tracked.message_id),
                extension: self.config.extension,
                window_end: tracked.window_end,
                last: shortened,
            });
        }
    }

    /// SQS applied an extension of `seconds` sent at `sent_at`. Returns when the next one falls
    /// due, if one follows.
    pub(crate) fn extended(
        &mut self,
        key: u64,
        sent_at: Instant,
        seconds: u32,
        last: bool,
    ) -> Option<Instant> {
        let deadline = sent_at + Duration::from_secs(u64::from(seconds));
        let due = self.due_at(deadline);
        let tracked = self.tracked.get_mut(&key)?;
        tracked.deadline = deadline;
        tracked.failures = 0;
        if last {
            tracked.phase = Phase::Done;
            return None;
        }
        tracked.phase = Phase::Waiting;
        tracked.due = due;
        self.due.insert((due, key));
        Some(due)
    }

    /// An extension failed at `now`, for good (`permanent`: SQS refused it in a way sending it
    /// again cannot mend) or after its call's retries. Before the delivery's known deadline, a
    /// transient failure puts it back to wait for a retry (see [`retry_delay`]), due no later
    /// than that deadline; a permanent one, or one at or past the deadline, gives it up.
    pub(crate) fn failed(&mut self, key: u64, now: Instant, permanent: bool) -> AfterFailure {
        let Some(tracked) = self.tracked.get_mut(&key) else {
            return AfterFailure::Untracked;
        };
        if tracked.phase == Phase::Waiting {
            // Not in flight after all: its place among the due times goes.
            self.due.remove(&(tracked.due, key));
        }
        if permanent || now >= tracked.deadline || crate::defect!(HeartbeatGivesUpOnFailure) {
            tracked.phase = Phase::Done;
            return AfterFailure::GaveUp;
        }
        tracked.failures = tracked.failures.saturating_add(1);
        let due = (now + retry_delay(tracked.failures, self.config.margin)).min(tracked.deadline);
        tracked.phase = Phase::Waiting;
        tracked.due = due;
        self.due.insert((due, key));
        AfterFailure::Retry {
            due,
            deadline: tracked.deadline,
        }
    }

    /// When the next extension falls due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.due.first().map(|&(due, _)| due)
    }

    /// Deliveries tracked.
    pub(crate) fn len(&self) -> usize {
        self.tracked.len()
    }

    /// The deadline of a tracked delivery.
    pub(crate) fn deadline(&self, key: u64) -> Option<Instant> {
        self.tracked.get(&key).map(|t| t.deadline)
    }
}

#[cfg(test)]
mod tests {
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
        let asked =
            HeartbeatConfig::for_visibility(VT, Some(Duration::from_secs(20))).expect("some");
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
}
