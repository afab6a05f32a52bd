//! The round trip to SQS, as the engine measures it on its short calls (opening the queue,
//! batch settlements; never a long poll, whose wait is not the network's): how long a receive
//! under way at shutdown may still take to answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A smoothed round trip, in microseconds; zero until the first sample.
#[derive(Debug, Default)]
pub(crate) struct RoundTrip {
    micros: AtomicU64,
}

/// Without a sample: as long as a receive under way at shutdown may take.
const UNKNOWN_GRACE: Duration = Duration::from_secs(1);
/// The least grace: a round trip on loopback is well under it.
const MIN_GRACE: Duration = Duration::from_millis(50);

impl RoundTrip {
    /// Takes one call's duration in (a moving average, each sample weighing an eighth).
    pub(crate) fn sample(&self, took: Duration) {
        let took = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        // Relaxed: a lost update only skips one sample.
        let old = self.micros.load(Ordering::Relaxed);
        let new = if old == 0 {
            took
        } else {
            old - old / 8 + took / 8
        };
        self.micros.store(new.max(1), Ordering::Relaxed);
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
}
