//! How a message is settled when its handler returns an `Err`: a fixed [`Outcome`], or a
//! redelivery delay that grows with the message's receive count.

use std::time::Duration;

use crate::error::ConfigError;
use crate::handle::outcome::Outcome;
use crate::limits::MAX_VISIBILITY;

/// How the engine settles a message whose handler returned an `Err` (see
/// [`EngineBuilder::on_handler_error`](crate::EngineBuilder::on_handler_error)).
///
/// The default is [`Backoff`](Self::Backoff) with [`ErrorBackoff::default`]: 1 s doubling
/// with each receive, up to 15 minutes. A message whose handler keeps failing (a poison
/// message) then comes back a few times a minute at first and every 15 minutes at most, rather
/// than at once, forever, hundreds of times a second. With a redrive policy SQS still moves it
/// to the dead-letter queue after its last allowed receive; the backoff only spaces the
/// receives out.
///
/// An [`Outcome`] converts into a policy, so `on_handler_error(Outcome::Drop)` reads as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandlerErrorPolicy {
    /// Settle every failed message with this outcome, whatever its receive count.
    /// [`Outcome::Retry`] hands the message out again at once.
    Outcome(Outcome),
    /// Return the message with a visibility that grows with its receive count (an
    /// [`Outcome::RetryAfter`] of [`ErrorBackoff::delay`]).
    Backoff(ErrorBackoff),
}

impl Default for HandlerErrorPolicy {
    fn default() -> Self {
        Self::Backoff(ErrorBackoff::default())
    }
}

impl From<Outcome> for HandlerErrorPolicy {
    fn from(outcome: Outcome) -> Self {
        Self::Outcome(outcome)
    }
}

impl From<ErrorBackoff> for HandlerErrorPolicy {
    fn from(backoff: ErrorBackoff) -> Self {
        Self::Backoff(backoff)
    }
}

impl HandlerErrorPolicy {
    /// The outcome for a failed delivery at `receive_count` (the first receive is 1), with a
    /// random draw for the backoff's spread.
    pub(crate) fn outcome(&self, receive_count: u32) -> Outcome {
        match self {
            Self::Outcome(outcome) => *outcome,
            Self::Backoff(backoff) => {
                Outcome::RetryAfter(backoff.delay(receive_count, fastrand::f64()))
            }
        }
    }

    /// The policy, when its settings are in range.
    pub(crate) fn validated(self) -> Result<Self, ConfigError> {
        if let Self::Backoff(backoff) = self {
            backoff.validated()?;
        }
        Ok(self)
    }
}

/// A redelivery delay for failed messages that doubles with each receive, up to a cap.
///
/// The delay after the delivery at receive count `n` (the first receive is 1) is
/// `min(max, base × 2^(n−1))`, less up to a quarter of it at random, so that messages that
/// failed together (a dependency went away) do not all come back in the same second. It never
/// falls below three quarters of that ceiling, so it still grows with each receive until the
/// cap. SQS counts visibility in whole seconds: the delay is rounded up to one, and, as for
/// any [`Outcome::RetryAfter`], shortened to end within 12 hours of the receive.
///
/// `base` is at least 1 s and at most `max`; `max` is at most 12 hours. The engine checks
/// them when it is built ([`EngineBuilder::build`](crate::EngineBuilder::build)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorBackoff {
    base: Duration,
    max: Duration,
}

impl Default for ErrorBackoff {
    /// 1 s doubling to at most 15 minutes: 1, 2, 4 … 512 s, then 15 minutes for every later
    /// receive.
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            max: Duration::from_secs(15 * 60),
        }
    }
}

impl ErrorBackoff {
    /// A delay of `base` after the first receive, doubling with each receive up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self { base, max }
    }

    /// The delay after the first receive.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The longest delay.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The delay, before its random spread, after the delivery at `receive_count`:
    /// `min(max, base × 2^(receive_count − 1))`.
    pub fn ceiling(&self, receive_count: u32) -> Duration {
        let shift = receive_count.saturating_sub(1).min(31);
        self.base
            .checked_mul(1u32 << shift)
            .map_or(self.max, |delay| delay.min(self.max))
    }

    /// The delay after the delivery at `receive_count`, spread by `unit`, a number in
    /// `0.0..=1.0`: the [`ceiling`](Self::ceiling) less `unit` quarters of it.
    pub fn delay(&self, receive_count: u32, unit: f64) -> Duration {
        let ceiling = self.ceiling(receive_count);
        ceiling.saturating_sub(ceiling.mul_f64(unit.clamp(0.0, 1.0) / 4.0))
    }

    /// The backoff, when `base` is at least 1 s and at most `max`, and `max` at most 12 hours.
    fn validated(self) -> Result<Self, ConfigError> {
        if self.max > MAX_VISIBILITY {
            return Err(ConfigError::duration(
                "on_handler_error",
                self.max,
                "a backoff whose longest delay is at most 12 hours",
            ));
        }
        if self.base < Duration::from_secs(1) || self.base > self.max {
            return Err(ConfigError::duration(
                "on_handler_error",
                self.base,
                "a backoff whose first delay is at least 1 s and at most its longest",
            ));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn the_default_doubles_from_a_second_to_fifteen_minutes() {
        let backoff = ErrorBackoff::default();
        let ceilings: Vec<u64> = (1..=12)
            .map(|count| backoff.ceiling(count).as_secs())
            .collect();
        assert_eq!(ceilings, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]);
        assert_eq!(backoff.ceiling(u32::MAX), Duration::from_secs(900));
        assert_eq!(
            backoff.ceiling(0),
            SECOND,
            "a missing receive count is the first"
        );
    }

    #[test]
    fn the_spread_takes_at_most_a_quarter_and_the_delay_still_grows() {
        let backoff = ErrorBackoff::default();
        assert_eq!(backoff.delay(4, 0.0), 8 * SECOND);
        assert_eq!(backoff.delay(4, 1.0), 6 * SECOND);
        assert_eq!(backoff.delay(4, 7.0), 6 * SECOND, "the draw is clamped");
        for count in 1..10 {
            assert!(
                backoff.delay(count + 1, 1.0) > backoff.delay(count, 0.0),
                "the shortest delay after receive {} passes the longest after receive {count}",
                count + 1
            );
        }
    }

    #[test]
    fn the_default_policy_backs_off_and_an_outcome_is_a_policy() {
        assert_eq!(
            HandlerErrorPolicy::default(),
            HandlerErrorPolicy::Backoff(ErrorBackoff::default())
        );
        let Outcome::RetryAfter(delay) = HandlerErrorPolicy::default().outcome(3) else {
            panic!("the default returns the message after a delay");
        };
        assert!((3 * SECOND..=4 * SECOND).contains(&delay), "{delay:?}");
        assert_eq!(
            HandlerErrorPolicy::from(Outcome::Drop).outcome(3),
            Outcome::Drop
        );
    }

    #[test]
    fn an_absurd_backoff_is_refused_with_what_it_must_be() {
        let refused = |base, max| {
            HandlerErrorPolicy::from(ErrorBackoff::new(base, max))
                .validated()
                .expect_err("refused")
                .to_string()
        };
        let zero = refused(Duration::ZERO, 60 * SECOND);
        assert!(
            zero.contains("on_handler_error") && zero.contains("at least 1 s"),
            "{zero}"
        );
        let inverted = refused(60 * SECOND, SECOND);
        assert!(inverted.contains("at most its longest"), "{inverted}");
        let long = refused(SECOND, MAX_VISIBILITY + SECOND);
        assert!(long.contains("at most 12 hours"), "{long}");
        for (base, max) in [(SECOND, SECOND), (SECOND, MAX_VISIBILITY)] {
            HandlerErrorPolicy::from(ErrorBackoff::new(base, max))
                .validated()
                .expect("in range");
        }
        HandlerErrorPolicy::from(Outcome::RetryAfter(Duration::MAX))
            .validated()
            .expect("a fixed retry_after is shortened at settlement, as any other");
    }
}
