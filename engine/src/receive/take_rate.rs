//! How fast the workers take received messages: the demand the receivers size themselves by.

use std::time::Duration;

use tokio::time::Instant;

/// The shortest window a rate is measured over: on loopback a round trip is a fraction of a
/// millisecond, and a window that short counts a receive batch or two.
const MIN_WINDOW: Duration = Duration::from_millis(10);

/// Messages taken per second, over the last window of at least a round trip that ended. Pure:
/// it takes `now` and the count taken so far.
#[derive(Debug, Default)]
pub(crate) struct TakeRate {
    /// When the window under way began, and the count taken then; `None` before the first.
    began: Option<(Instant, u64)>,
    /// The rate of the last window that ended; `None` until one has.
    per_second: Option<f64>,
}

impl TakeRate {
    /// The rate of the last window that ended, with `taken` messages taken so far, ending the
    /// one under way first if it has lasted `at_least` (and [`MIN_WINDOW`]); `None` until a
    /// window has ended.
    pub(crate) fn per_second(
        &mut self,
        now: Instant,
        at_least: Duration,
        taken: u64,
    ) -> Option<f64> {
        match self.began {
            None => self.began = Some((now, taken)),
            Some((began, taken_then)) => {
                let lasted = now.saturating_duration_since(began);
                if lasted >= at_least.max(MIN_WINDOW) {
                    let count = taken.saturating_sub(taken_then) as f64;
                    self.per_second = Some(count / lasted.as_secs_f64());
                    self.began = Some((now, taken));
                }
            }
        }
        self.per_second
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_that_of_the_last_window_of_at_least_a_round_trip() {
        let mut rate = TakeRate::default();
        let start = Instant::now();
        let ms = |n| start + Duration::from_millis(n);
        let round_trip = Duration::from_millis(50);
        assert_eq!(rate.per_second(start, round_trip, 0), None, "no window yet");
        assert_eq!(
            rate.per_second(ms(40), round_trip, 30),
            None,
            "the first window is shorter than a round trip"
        );
        assert_eq!(rate.per_second(ms(50), round_trip, 50), Some(1_000.0));
        assert_eq!(
            rate.per_second(ms(60), round_trip, 60),
            Some(1_000.0),
            "the last window that ended, until the next one does"
        );
        assert_eq!(rate.per_second(ms(150), round_trip, 60), Some(100.0));
        assert_eq!(
            rate.per_second(ms(155), Duration::ZERO, 60),
            Some(100.0),
            "a window lasts at least MIN_WINDOW"
        );
        assert_eq!(rate.per_second(ms(160), Duration::ZERO, 60), Some(0.0));
    }
}
