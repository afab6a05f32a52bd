//! The heartbeat: keeps in-flight messages invisible while their handlers run.
//!
//! One [`Schedule`] per queue holds every unsettled delivery with its visibility deadline. When
//! a deadline comes within the margin, the driver asks for an extension through the settlement
//! coalescer, so extensions of messages that settle independently share
//! `ChangeMessageVisibilityBatch` calls with each other and with retries. No extension reaches
//! past 12 hours from the receive: the last one ends there.
//!
//! [`Schedule`] is pure: no I/O, no clock; the driver passes `now` in.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::queue::QueueRuntime;
use crate::settle::{self, visibility::visibility_seconds};

/// The heartbeat of one queue: its schedule, and the driver's wake-up.
pub(crate) struct Heartbeat {
    schedule: Mutex<Schedule>,
    wake: Notify,
}

impl Heartbeat {
    pub(crate) fn new(config: HeartbeatConfig) -> Self {
        Self {
            schedule: Mutex::new(Schedule::new(config)),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Schedule> {
        // Plain data, and no code under the lock panics.
        self.schedule.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts keeping a delivery invisible. Returns its key.
    pub(crate) fn register(
        &self,
        receipt: Arc<str>,
        message_id: Arc<str>,
        deadline: Instant,
        window_end: Instant,
    ) -> u64 {
        let (key, wake) = self
            .lock()
            .register(receipt, message_id, deadline, window_end);
        if wake {
            self.wake.notify_one();
        }
        key
    }

    /// Stops keeping a delivery invisible; returns its deadline as last known. Never blocks
    /// beyond a short lock, never awaits: safe from `Drop`.
    pub(crate) fn deregister(&self, key: u64) -> Option<Instant> {
        self.lock().deregister(key)
    }

    pub(crate) fn extended(&self, key: u64, sent_at: Instant, seconds: u32, last: bool) {
        if self.lock().extended(key, sent_at, seconds, last) {
            self.wake.notify_one();
        }
    }

    /// Takes the extensions due at `now`, as the driver does.
    #[cfg(test)]
    pub(crate) fn poll_due(&self, now: Instant) -> Vec<Extension> {
        self.lock().poll_due(now)
    }

    /// Whether a delivery is still kept invisible: neither settled nor dropped.
    pub(crate) fn is_tracked(&self, key: u64) -> bool {
        self.lock().tracked.contains_key(&key)
    }

    /// An extension finally failed. Returns whether the delivery was still tracked: when it
    /// was settled meanwhile, its extension failing is of no consequence.
    pub(crate) fn failed(&self, key: u64) -> bool {
        self.lock().failed(key)
    }
}

/// Asks for the extensions as they fall due, until `stop` is cancelled.
pub(crate) async fn run(queue: Arc<QueueRuntime>, stop: CancellationToken) {
    let Some(heartbeat) = &queue.heartbeat else {
        return;
    };
    loop {
        let (due, next) = {
            let mut schedule = heartbeat.lock();
            schedule.disarm();
            let due = schedule.poll_due(Instant::now());
            (due, schedule.arm())
        };
        settle::enqueue_extensions(&queue, due);
        tokio::select! {
            () = stop.cancelled() => return,
            () = heartbeat.wake.notified() => {}
            () = async {
                match next {
                    Some(next) => tokio::time::sleep_until(next).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}

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
    /// The heartbeat for a visibility timeout: extensions of the same length, a margin of a
    /// fifth of it (at least 1 s, at most half the timeout and 60 s), and a slack of half the
    /// margin. `None` for a visibility timeout under 2 s, too short to extend in time.
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
            extension: visibility,
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
    /// No more extensions: the last one reached the 12-hour window's end, or one failed.
    Done,
}

#[derive(Debug)]
struct Tracked {
    receipt: Arc<str>,
    message_id: Arc<str>,
    deadline: Instant,
    window_end: Instant,
    phase: Phase,
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
    /// `(due, key)` for every delivery in [`Phase::Waiting`].
    due: BTreeSet<(Instant, u64)>,
    /// When the driver will next look, if it is asleep.
    armed: Option<Instant>,
}

impl Schedule {
    pub(crate) fn new(config: HeartbeatConfig) -> Self {
        Self {
            config,
            next_key: 0,
            tracked: HashMap::default(),
            due: BTreeSet::new(),
            armed: None,
        }
    }

    fn due_at(&self, deadline: Instant) -> Instant {
        deadline.checked_sub(self.config.margin).unwrap_or(deadline)
    }

    /// Starts tracking a delivery invisible until `deadline`. Returns its key, and whether the
    /// driver must wake to re-arm (the delivery falls due before the driver would look).
    pub(crate) fn register(
        &mut self,
        receipt: Arc<str>,
        message_id: Arc<str>,
        deadline: Instant,
        window_end: Instant,
    ) -> (u64, bool) {
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
            },
        );
        self.due.insert((due, key));
        let wake = self.armed.is_none_or(|armed| due < armed);
        (key, wake)
    }

    /// Stops tracking a delivery (settled, or dropped unsettled). Returns its deadline as last
    /// known.
    pub(crate) fn deregister(&mut self, key: u64) -> Option<Instant> {
        let tracked = self.tracked.remove(&key)?;
        if tracked.phase == Phase::Waiting {
            self.due.remove(&(self.due_at(tracked.deadline), key));
        }
        Some(tracked.deadline)
    }

    /// The extensions due at `now`, and those due within the slack after it. Each is marked
    /// as extending until [`extended`](Self::extended) or [`failed`](Self::failed).
    pub(crate) fn poll_due(&mut self, now: Instant) -> Vec<Extension> {
        let horizon = now + self.config.slack;
        let mut extensions = Vec::new();
        while let Some(&(due, key)) = self.due.first() {
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
        extensions
    }

    /// SQS applied an extension of `seconds` sent at `sent_at`. Returns whether the driver
    /// must wake to re-arm (the next extension falls due before the driver would look).
    pub(crate) fn extended(
        &mut self,
        key: u64,
        sent_at: Instant,
        seconds: u32,
        last: bool,
    ) -> bool {
        let deadline = sent_at + Duration::from_secs(u64::from(seconds));
        let due = self.due_at(deadline);
        let Some(tracked) = self.tracked.get_mut(&key) else {
            return false;
        };
        tracked.deadline = deadline;
        if last {
            tracked.phase = Phase::Done;
            return false;
        }
        tracked.phase = Phase::Waiting;
        self.due.insert((due, key));
        self.armed.is_none_or(|armed| due < armed)
    }

    /// An extension finally failed: no more are tried for this delivery.
    pub(crate) fn failed(&mut self, key: u64) -> bool {
        match self.tracked.get_mut(&key) {
            Some(tracked) => {
                tracked.phase = Phase::Done;
                true
            }
            None => false,
        }
    }

    /// When the next extension falls due. Records it as the time the driver will look.
    pub(crate) fn arm(&mut self) -> Option<Instant> {
        self.armed = self.due.first().map(|&(due, _)| due);
        self.armed
    }

    /// The driver is awake and will look again before sleeping.
    pub(crate) fn disarm(&mut self) {
        self.armed = Some(Instant::now());
    }

    /// Deliveries tracked.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.tracked.len()
    }

    /// The deadline of a tracked delivery.
    #[cfg(test)]
    pub(crate) fn deadline(&self, key: u64) -> Option<Instant> {
        self.tracked.get(&key).map(|t| t.deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settle::visibility::MAX_VISIBILITY;

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
    fn the_default_margin_is_a_fifth_of_the_visibility_timeout() {
        let c = HeartbeatConfig::for_visibility(VT, None).expect("some");
        assert_eq!(c.margin, Duration::from_secs(6));
        assert_eq!(c.slack, Duration::from_secs(3));
        assert_eq!(c.extension, VT);
        let short = HeartbeatConfig::for_visibility(Duration::from_secs(3), None).expect("some");
        assert_eq!(short.margin, Duration::from_secs(1));
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
        assert_eq!(s.arm(), Some(start + Duration::from_secs(24)));
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
        assert_eq!(keys(&s.poll_due(start + Duration::from_secs(25))), [c]);
    }

    #[test]
    fn an_extension_moves_the_deadline_and_the_next_one_follows() {
        let start = Instant::now();
        let mut s = schedule();
        let a = register(&mut s, "a", start);
        let at = start + Duration::from_secs(24);
        assert_eq!(keys(&s.poll_due(at)), [a]);
        assert_eq!(
            s.arm(),
            None,
            "nothing due while the extension is in flight"
        );
        s.extended(a, at, 30, false);
        assert_eq!(s.deadline(a), Some(at + VT));
        assert_eq!(s.arm(), Some(at + Duration::from_secs(24)));
    }

    #[test]
    fn an_applied_extension_wakes_a_driver_with_nothing_else_due() {
        let start = Instant::now();
        let mut s = schedule();
        let a = register(&mut s, "a", start);
        let at = start + Duration::from_secs(24);
        s.poll_due(at);
        assert_eq!(s.arm(), None, "the driver sleeps with nothing due");
        assert!(s.extended(a, at, 30, false), "so the answer must wake it");
        s.arm();
        let b = register(&mut s, "b", at);
        s.poll_due(at + Duration::from_secs(24));
        assert!(
            !s.extended(b, at + Duration::from_secs(24), 30, false),
            "a later due wakes no one"
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
        assert_eq!(s.arm(), None);
    }

    #[test]
    fn a_delivery_settled_while_its_extension_is_in_flight_is_forgotten() {
        let start = Instant::now();
        let mut s = schedule();
        let a = register(&mut s, "a", start);
        s.poll_due(start + Duration::from_secs(24));
        assert!(s.deregister(a).is_some());
        s.extended(a, start + Duration::from_secs(24), 30, false);
        assert_eq!(s.arm(), None);
    }

    #[test]
    fn the_last_extension_ends_at_the_twelve_hour_window() {
        let received = Instant::now();
        let mut s = schedule();
        let a = register(&mut s, "a", received);
        // Keep extending until the window's end comes within one extension.
        let mut extensions = 0;
        loop {
            let now = s.arm().expect("still due");
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
        assert_eq!(s.arm(), None, "no extension after the last");
        assert!(s.poll_due(received + MAX_VISIBILITY * 2).is_empty());
    }

    #[test]
    fn a_failed_extension_stops_the_heartbeat_for_that_delivery_only() {
        let start = Instant::now();
        let mut s = schedule();
        let a = register(&mut s, "a", start);
        let b = register(&mut s, "b", start);
        let due = s.poll_due(start + Duration::from_secs(24));
        assert_eq!(due.len(), 2);
        s.failed(a);
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
    fn a_registration_wakes_the_driver_only_when_it_falls_due_first() {
        let start = Instant::now();
        let mut s = schedule();
        assert!(
            s.register(
                Arc::from("a"),
                Arc::from("a"),
                start + VT,
                start + MAX_VISIBILITY
            )
            .1
        );
        s.arm();
        assert!(
            !s.register(
                Arc::from("b"),
                Arc::from("b"),
                start + VT * 2,
                start + MAX_VISIBILITY
            )
            .1
        );
        assert!(
            s.register(
                Arc::from("c"),
                Arc::from("c"),
                start + VT / 2,
                start + MAX_VISIBILITY
            )
            .1
        );
    }
}
