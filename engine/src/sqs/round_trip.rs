//! The round trip to SQS, as the engine measures it: on its short calls (opening the queue,
//! batch settlements; never a long poll, whose wait is not the network's), how long a receive
//! under way at shutdown may still take to answer; on full receives and on settlement calls,
//! how many calls in flight the round trip is worth and whether more would only queue at the
//! server.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// A smoothed round trip, in microseconds; zero until the first sample. The first eight
/// samples are averaged evenly, so that the first one (which may be far from the mean on a
/// jittery network) does not linger; later ones each weigh an eighth.
#[derive(Debug, Default)]
pub(crate) struct RoundTrip {
    micros: AtomicU64,
    samples: AtomicU64,
}

/// Without a sample: as long as a receive under way at shutdown may take.
const UNKNOWN_GRACE: Duration = Duration::from_secs(1);
/// The longest the receivers take to stop at shutdown: a long poll under way gets up to this
/// long (four round trips, at most this) to answer, and is abandoned after it. A part of the
/// shutdown's worst case, which a deployment's grace period must cover.
pub const RECEIVE_STOP_GRACE: Duration = UNKNOWN_GRACE;
/// The least grace: a round trip on loopback is well under it.
const MIN_GRACE: Duration = Duration::from_millis(50);
/// The weight of a sample in the moving average, once past the first ones: 1 / `SMOOTHING`.
const SMOOTHING: u64 = 8;

impl RoundTrip {
    /// Takes one call's duration in.
    pub(crate) fn sample(&self, took: Duration) {
        let took = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        // Relaxed: a lost update only skips one sample.
        let n = self
            .samples
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1)
            .min(SMOOTHING);
        let old = self.micros.load(Ordering::Relaxed);
        let new = if old == 0 {
            took
        } else {
            old - old / n + took / n
        };
        self.micros.store(new.max(1), Ordering::Relaxed);
    }

    /// Forgets every sample.
    fn reset(&self) {
        self.micros.store(0, Ordering::Relaxed);
        self.samples.store(0, Ordering::Relaxed);
    }

    /// How many samples were taken in.
    fn samples(&self) -> u64 {
        self.samples.load(Ordering::Relaxed)
    }

    /// The smoothed round trip; `None` until the first sample.
    pub(crate) fn get(&self) -> Option<Duration> {
        match self.micros.load(Ordering::Relaxed) {
            0 => None,
            micros => Some(Duration::from_micros(micros)),
        }
    }

    /// How long a receive under way at shutdown may still take: four round trips (the answer
    /// of a poll that took messages at the last moment is one away), at least 50 ms, at most a
    /// second; a second while nothing was measured.
    pub(crate) fn shutdown_grace(&self) -> Duration {
        match self.micros.load(Ordering::Relaxed) {
            0 => UNKNOWN_GRACE,
            micros => (Duration::from_micros(micros) * 4).clamp(MIN_GRACE, UNKNOWN_GRACE),
        }
    }
}

/// Calls of a kind in flight at most for a round trip to count as unloaded, until the server
/// shows overload (see [`LoadedRoundTrip::remeasure`]).
pub(crate) const LIGHT_IN_FLIGHT: usize = 8;
/// Unloaded samples taken before the unloaded round trip is trusted: one sample of a jittery
/// network may be a fraction of its mean, and the first calls to answer of those in flight
/// are the short ones.
const LIGHT_SAMPLES: u64 = 16;

/// The round trip of one kind of call (full receives, whose long poll SQS answers at once when
/// it has messages; settlement batch calls), as the engine sizes the calls in flight of that
/// kind by it, twice: smoothed over every sample (`now`), and smoothed over the samples taken
/// while few calls of the kind were in flight (`unloaded`: the network's round trip without
/// the queueing that many calls in flight cause at a server short of CPU). Few is
/// [`LIGHT_IN_FLIGHT`] at first, and the count the calls were cut to once the server showed
/// overload (see [`remeasure`](Self::remeasure)): on a server that serves calls one at a time,
/// eight in flight already queue.
///
/// Both are means of the same kind, so a jittery network (SQS's round trips have a tail several
/// times their median) does not look loaded: only waiting that grows with the calls in flight
/// moves `now` away from `unloaded`. The unloaded round trip follows the network again
/// whenever the load falls back to a few calls.
#[derive(Debug)]
pub(crate) struct LoadedRoundTrip {
    now: RoundTrip,
    unloaded: RoundTrip,
    /// The most calls in flight for a sample to count as unloaded.
    light: AtomicUsize,
    /// Whether the unloaded round trip is being measured again, after the server showed
    /// overload: the calls count as queueing until it is known.
    remeasuring: AtomicBool,
}

impl Default for LoadedRoundTrip {
    fn default() -> Self {
        Self {
            now: RoundTrip::default(),
            unloaded: RoundTrip::default(),
            light: AtomicUsize::new(LIGHT_IN_FLIGHT),
            remeasuring: AtomicBool::new(false),
        }
    }
}

impl LoadedRoundTrip {
    /// Takes in a call that took `took` while `in_flight` calls of its kind were under way
    /// (this one included).
    pub(crate) fn sample(&self, took: Duration, in_flight: usize) {
        self.now.sample(took);
        if in_flight <= self.light() {
            self.unloaded.sample(took);
            if self.unloaded.samples() >= LIGHT_SAMPLES {
                self.remeasuring.store(false, Ordering::Relaxed);
            }
        }
    }

    /// Forgets the unloaded round trip and measures it again from the samples taken with at
    /// most `light` calls in flight (from now on, `light` is what counts as few). Until
    /// [`LIGHT_SAMPLES`] such samples are in, [`remeasuring`](Self::remeasuring) and
    /// [`queueing`](Self::queueing) answer `true`; keeping the calls in flight to `light`
    /// meanwhile is the caller's part. For when the server showed overload: the unloaded round
    /// trip on record may have been taken with calls already queueing there.
    pub(crate) fn remeasure(&self, light: usize) {
        self.light.store(light.max(1), Ordering::Relaxed);
        self.unloaded.reset();
        self.remeasuring.store(true, Ordering::Relaxed);
    }

    /// Whether the unloaded round trip is being measured again (see
    /// [`remeasure`](Self::remeasure)).
    pub(crate) fn remeasuring(&self) -> bool {
        self.remeasuring.load(Ordering::Relaxed)
    }

    /// The most calls in flight for a sample to count as unloaded.
    pub(crate) fn light(&self) -> usize {
        self.light.load(Ordering::Relaxed)
    }

    /// The round trip now (smoothed over every sample); `None` until the first.
    pub(crate) fn now(&self) -> Option<Duration> {
        self.now.get()
    }

    /// The unloaded round trip; `None` until [`LIGHT_SAMPLES`] unloaded samples were taken.
    pub(crate) fn unloaded(&self) -> Option<Duration> {
        (self.unloaded.samples() >= LIGHT_SAMPLES)
            .then(|| self.unloaded.get())
            .flatten()
    }

    /// Whether the calls answer so much slower than unloaded that the unloaded round trip is
    /// worth measuring again (see [`remeasure`](Self::remeasure)): the round trip now is more
    /// than four times the unloaded one. `false` while either is unknown, and while the
    /// unloaded one is being measured again.
    pub(crate) fn overloaded(&self) -> bool {
        match (self.now.get(), self.unloaded()) {
            (Some(now), Some(unloaded)) => now > unloaded * 4,
            _ => false,
        }
    }

    /// Whether the calls queue at the server: the round trip now is more than twice the
    /// unloaded one, or the unloaded one is being measured again after the server showed
    /// overload. Otherwise `false` while either is unknown.
    pub(crate) fn queueing(&self) -> bool {
        if self.remeasuring() {
            return true;
        }
        match (self.now.get(), self.unloaded()) {
            (Some(now), Some(unloaded)) => now > unloaded * 2,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_is_four_round_trips_within_its_bounds() {
        let rtt = RoundTrip::default();
        assert_eq!(
            rtt.shutdown_grace(),
            Duration::from_secs(1),
            "nothing measured"
        );
        rtt.sample(Duration::from_millis(40));
        assert_eq!(rtt.shutdown_grace(), Duration::from_millis(160));
        for _ in 0..100 {
            rtt.sample(Duration::from_micros(500));
        }
        assert_eq!(
            rtt.shutdown_grace(),
            Duration::from_millis(50),
            "at least 50 ms"
        );
        for _ in 0..100 {
            rtt.sample(Duration::from_secs(2));
        }
        assert_eq!(
            rtt.shutdown_grace(),
            Duration::from_secs(1),
            "at most a second"
        );
    }

    #[test]
    fn the_unloaded_round_trip_waits_for_enough_light_samples() {
        let rtt = LoadedRoundTrip::default();
        for _ in 0..LIGHT_SAMPLES - 1 {
            rtt.sample(Duration::from_millis(10), 1);
            rtt.sample(Duration::from_millis(10), LIGHT_IN_FLIGHT + 1);
        }
        assert_eq!(rtt.unloaded(), None, "one light sample short");
        rtt.sample(Duration::from_millis(10), LIGHT_IN_FLIGHT);
        assert_eq!(rtt.unloaded(), Some(Duration::from_millis(10)));
    }

    #[test]
    fn jitter_is_not_queueing() {
        // A tail several times the median, at light load and at heavy load alike.
        let jittery = [3, 8, 10, 12, 30, 6, 9, 50, 4, 11];
        let rtt = LoadedRoundTrip::default();
        for (i, ms) in jittery.iter().cycle().take(200).enumerate() {
            let in_flight = if i < 40 { 1 } else { 64 };
            rtt.sample(Duration::from_millis(*ms), in_flight);
            if i >= 40 {
                assert!(!rtt.queueing(), "sample {i}: {rtt:?}");
            }
        }
    }

    #[test]
    fn a_round_trip_that_grows_with_the_receives_in_flight_is_queueing() {
        let rtt = LoadedRoundTrip::default();
        for _ in 0..LIGHT_SAMPLES {
            rtt.sample(Duration::from_millis(5), 2);
        }
        assert!(!rtt.queueing());
        for _ in 0..20 {
            rtt.sample(Duration::from_millis(40), 30);
        }
        assert!(rtt.queueing());
        assert_eq!(
            rtt.unloaded(),
            Some(Duration::from_millis(5)),
            "loaded samples leave the unloaded round trip alone"
        );
    }

    #[test]
    fn an_overloaded_server_is_measured_again_with_few_calls_in_flight() {
        // A server that serves one call at a time, 100 ms each: eight in flight answer in
        // 800 ms, which became the unloaded round trip; sixteen in flight are not twice that.
        let rtt = LoadedRoundTrip::default();
        for _ in 0..LIGHT_SAMPLES {
            rtt.sample(Duration::from_millis(800), LIGHT_IN_FLIGHT);
        }
        for _ in 0..20 {
            rtt.sample(Duration::from_millis(1_600), 16);
        }
        assert!(
            !rtt.queueing(),
            "measured at eight in flight, queueing is not seen"
        );
        rtt.remeasure(1);
        assert!(rtt.queueing(), "queueing until measured again");
        for _ in 0..LIGHT_SAMPLES - 1 {
            rtt.sample(Duration::from_millis(100), 1);
            rtt.sample(Duration::from_millis(400), 4);
        }
        assert!(rtt.remeasuring(), "one light sample short");
        assert!(rtt.queueing());
        rtt.sample(Duration::from_millis(100), 1);
        assert!(!rtt.remeasuring());
        assert_eq!(rtt.unloaded(), Some(Duration::from_millis(100)));
        for _ in 0..20 {
            rtt.sample(Duration::from_millis(400), 4);
        }
        assert!(rtt.queueing(), "four in flight are now seen to queue");
        assert!(
            !rtt.overloaded(),
            "four times the unloaded round trip is not past four"
        );
        for _ in 0..40 {
            rtt.sample(Duration::from_millis(800), 8);
        }
        assert!(
            rtt.overloaded(),
            "eight in flight: eight times the unloaded round trip"
        );
    }
}
