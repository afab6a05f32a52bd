//! A cap on how many messages a second a queue's receivers take: a token bucket that each
//! receive takes its whole batch from before its call, and gives back what the answer did not
//! use. Pure: it takes `now` and answers how long to wait; the receivers sleep.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ConfigError;

/// The messages a second one receive's batch may be taken at, at least: one message every
/// 100 s.
const MIN_PER_SECOND: f64 = 0.01;

/// At most: a million messages a second, more than any queue's receivers bring.
const MAX_PER_SECOND: f64 = 1_000_000.0;

/// [`max_receive_rate`](crate::EngineBuilder::max_receive_rate), checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MaxReceiveRate(f64);

impl MaxReceiveRate {
    /// The range an error names.
    const EXPECTED: &'static str = "0.01..=1000000 messages a second";

    /// `per_second`, when it is a number within the range.
    pub(crate) fn new(per_second: f64) -> Result<Self, ConfigError> {
        if (MIN_PER_SECOND..=MAX_PER_SECOND).contains(&per_second) {
            Ok(Self(per_second))
        } else {
            Err(ConfigError::new(
                "max_receive_rate",
                per_second,
                Self::EXPECTED,
            ))
        }
    }

    /// Messages a second.
    pub(crate) fn get(self) -> f64 {
        self.0
    }
}

/// The bucket the receivers of one queue share. It holds one receive batch at most, so the
/// messages received never run ahead of the rate by more than one batch: what the receives
/// bring is what the workers may take, and nothing waits in the prefetch for the rate to
/// allow it.
#[derive(Debug)]
pub(crate) struct ReceiveRate {
    per_second: f64,
    /// One receive batch: what the bucket holds when full, and what a receive takes.
    batch: f64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    /// When `tokens` was counted.
    at: Instant,
}

impl ReceiveRate {
    /// A bucket for `per_second` messages a second, full at `now`: the first receive does not
    /// wait.
    pub(crate) fn new(per_second: MaxReceiveRate, batch: u8, now: Instant) -> Self {
        let batch = f64::from(batch.max(1));
        Self {
            per_second: per_second.get(),
            batch,
            bucket: Mutex::new(Bucket {
                tokens: batch,
                at: now,
            }),
        }
    }

    /// Messages a second.
    pub(crate) fn per_second(&self) -> f64 {
        self.per_second
    }

    /// Takes a whole receive batch at `now`, or answers how long until the bucket holds one
    /// (other receivers may take it first: ask again then).
    pub(crate) fn take_batch(&self, now: Instant) -> Result<(), Duration> {
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        self.refill(&mut bucket, now);
        if bucket.tokens >= self.batch {
            bucket.tokens -= self.batch;
            return Ok(());
        }
        let short = self.batch - bucket.tokens;
        Err(Duration::from_secs_f64(short / self.per_second).max(Duration::from_millis(1)))
    }

    /// Gives back the part of a batch taken that a receive's answer did not use: `unused`
    /// messages.
    pub(crate) fn give_back(&self, unused: usize, now: Instant) {
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        self.refill(&mut bucket, now);
        bucket.tokens = (bucket.tokens + unused as f64).min(self.batch);
    }

    fn refill(&self, bucket: &mut Bucket, now: Instant) {
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_second).min(self.batch);
        bucket.at = bucket.at.max(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_second: f64, batch: u8, now: Instant) -> ReceiveRate {
        ReceiveRate::new(
            MaxReceiveRate::new(per_second).expect("in range"),
            batch,
            now,
        )
    }

    #[test]
    fn a_full_bucket_gives_one_batch_then_waits_for_the_rate_to_refill_it() {
        let start = Instant::now();
        let bucket = rate(5.0, 10, start);
        assert_eq!(bucket.take_batch(start), Ok(()));
        assert_eq!(bucket.take_batch(start), Err(Duration::from_secs(2)));
        let later = start + Duration::from_secs(1);
        assert_eq!(bucket.take_batch(later), Err(Duration::from_secs(1)));
        assert_eq!(bucket.take_batch(start + Duration::from_secs(2)), Ok(()));
    }

    #[test]
    fn over_a_minute_the_batches_taken_stay_within_the_rate_plus_one_batch() {
        let start = Instant::now();
        let bucket = rate(25.0, 10, start);
        let mut now = start;
        let mut taken = 0;
        while now < start + Duration::from_secs(60) {
            match bucket.take_batch(now) {
                Ok(()) => taken += 10,
                Err(wait) => now += wait,
            }
        }
        assert!(taken <= 25 * 60 + 10, "{taken}");
        assert!(taken >= 25 * 60 - 10, "the rate is reached: {taken}");
    }

    #[test]
    fn what_an_answer_did_not_use_is_given_back_up_to_one_batch() {
        let start = Instant::now();
        let bucket = rate(1.0, 10, start);
        assert_eq!(bucket.take_batch(start), Ok(()));
        bucket.give_back(10, start);
        assert_eq!(
            bucket.take_batch(start),
            Ok(()),
            "an empty receive cost nothing"
        );
        bucket.give_back(3, start);
        assert_eq!(bucket.take_batch(start), Err(Duration::from_secs(7)));
        bucket.give_back(100, start);
        assert_eq!(
            bucket.take_batch(start),
            Ok(()),
            "never more than one batch"
        );
        assert!(bucket.take_batch(start).is_err());
    }

    #[test]
    fn a_rate_outside_the_range_or_not_a_number_is_refused() {
        for bad in [0.0, -1.0, 0.001, 2_000_000.0, f64::NAN, f64::INFINITY] {
            let error = MaxReceiveRate::new(bad).expect_err("refused");
            assert!(error.to_string().contains("max_receive_rate"), "{error}");
        }
        assert!(MaxReceiveRate::new(0.01).is_ok());
        assert!(MaxReceiveRate::new(1_000_000.0).is_ok());
    }
}
