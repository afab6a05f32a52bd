//! Exponential backoff with full jitter, under an attempt budget.

use std::time::Duration;

/// How failed calls are retried: exponential backoff with full jitter, at most `max_attempts`
/// tries in all.
///
/// The delay before retry `n` (the first retry is `n = 1`) is drawn uniformly from
/// `0..=min(max_delay, base * 2^(n-1))`, so that many consumers failing at once spread out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    max_delay: Duration,
    max_attempts: u32,
}

impl Default for Backoff {
    /// 50 ms doubling to at most 5 s, 8 attempts in all: a settlement survives about 10 s of
    /// throttling or outage before it fails.
    fn default() -> Self {
        Self {
            base: Duration::from_millis(50),
            max_delay: Duration::from_secs(5),
            max_attempts: 8,
        }
    }
}

impl Backoff {
    /// A backoff starting at `base`, capped at `max_delay`, with `max_attempts` tries in all
    /// (at least one).
    pub fn new(base: Duration, max_delay: Duration, max_attempts: u32) -> Self {
        Self {
            base,
            max_delay: max_delay.max(base),
            max_attempts: max_attempts.max(1),
        }
    }

    /// Tries in all, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The upper bound of the delay before retry `retry` (1-based).
    pub fn ceiling(&self, retry: u32) -> Duration {
        let shift = retry.saturating_sub(1).min(31);
        self.base
            .checked_mul(1u32 << shift)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// The delay before retry `retry` (1-based), with full jitter from `unit`, a number in
    /// `0.0..=1.0`.
    pub fn delay(&self, retry: u32, unit: f64) -> Duration {
        self.ceiling(retry).mul_f64(unit.clamp(0.0, 1.0))
    }

    /// The delay before retry `retry`, jittered with a random draw.
    pub(crate) fn jittered(&self, retry: u32) -> Duration {
        self.delay(retry, fastrand::f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_doubles_up_to_the_cap() {
        let b = Backoff::new(Duration::from_millis(50), Duration::from_secs(1), 10);
        assert_eq!(b.ceiling(1), Duration::from_millis(50));
        assert_eq!(b.ceiling(2), Duration::from_millis(100));
        assert_eq!(b.ceiling(3), Duration::from_millis(200));
        assert_eq!(b.ceiling(5), Duration::from_millis(800));
        assert_eq!(b.ceiling(6), Duration::from_secs(1));
        assert_eq!(b.ceiling(60), Duration::from_secs(1));
    }

    #[test]
    fn jitter_spreads_the_delay_below_the_ceiling() {
        let b = Backoff::default();
        assert_eq!(b.delay(3, 0.0), Duration::ZERO);
        assert_eq!(b.delay(3, 1.0), b.ceiling(3));
        assert_eq!(b.delay(3, 0.5), b.ceiling(3) / 2);
        for _ in 0..100 {
            assert!(b.jittered(4) <= b.ceiling(4));
        }
    }

    #[test]
    fn there_is_always_at_least_one_attempt() {
        assert_eq!(
            Backoff::new(Duration::ZERO, Duration::ZERO, 0).max_attempts(),
            1
        );
    }
}
