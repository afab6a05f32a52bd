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
    /// The receipt handle of another delivery of `message_id` in the schedule than the one of
    /// `key`, if there is one (it visits the whole schedule: for the planted defect
    /// [`DuplicateSettledAsOriginal`](crate::testing::Defect::DuplicateSettledAsOriginal)).
    #[cfg(feature = "testing")]
    pub(crate) fn other_receipt(&self, key: u64, message_id: &str) -> Option<Arc<str>> {
        self.tracked
            .iter()
            .filter(|(other, tracked)| **other != key && *tracked.message_id == *message_id)
            .min_by_key(|(other, _)| **other)
            .map(|(_, tracked)| Arc::clone(&tracked.receipt))
    }

    pub(crate) fn deadline(&self, key: u64) -> Option<Instant> {
        self.tracked.get(&key).map(|t| t.deadline)
    }
}

#[cfg(test)]
mod tests;
