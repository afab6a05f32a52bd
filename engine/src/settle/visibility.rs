//! Visibility arithmetic: whole seconds rounded up, and the 12-hour window from the receive.
//!
//! Pure functions of the times passed in; no clock is read here.

use std::time::Duration;

use tokio::time::Instant;

use crate::limits::MAX_VISIBILITY;
use crate::sqs::whole_seconds::ceil_seconds;

/// A requested visibility for one message: a delay from now, bounded by the end of the
/// message's 12-hour window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VisibilityTarget {
    /// The delay asked for.
    pub(crate) delay: Duration,
    /// When the message's 12-hour window from its receive ends.
    pub(crate) window_end: Instant,
}

impl VisibilityTarget {
    /// The visibility timeout to send at `now`: `delay` in whole seconds rounded up, shortened
    /// so that it ends no later than the window's end. The flag says whether it was shortened.
    pub(crate) fn seconds_at(&self, now: Instant) -> (u32, bool) {
        visibility_seconds(self.delay, self.window_end, now)
    }
}

/// `delay` in whole seconds, rounded up so a message never comes back before it, then
/// shortened to end no later than `window_end` (rounding down, for the same reason).
/// Returns the seconds and whether they were shortened.
pub(crate) fn visibility_seconds(
    delay: Duration,
    window_end: Instant,
    now: Instant,
) -> (u32, bool) {
    let wanted = ceil_seconds(delay);
    let remaining = window_end.saturating_duration_since(now).as_secs();
    let allowed = remaining.min(MAX_VISIBILITY.as_secs());
    if wanted > allowed {
        (to_u32(allowed), true)
    } else {
        (to_u32(wanted), false)
    }
}

fn to_u32(seconds: u64) -> u32 {
    u32::try_from(seconds).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_delay_is_rounded_up_to_whole_seconds() {
        let now = Instant::now();
        let end = now + MAX_VISIBILITY;
        assert_eq!(visibility_seconds(Duration::ZERO, end, now), (0, false));
        assert_eq!(
            visibility_seconds(Duration::from_millis(1), end, now),
            (1, false)
        );
        assert_eq!(
            visibility_seconds(Duration::from_millis(1500), end, now),
            (2, false)
        );
        assert_eq!(visibility_seconds(secs(3), end, now), (3, false));
        assert_eq!(
            visibility_seconds(Duration::from_nanos(3_000_000_001), end, now),
            (4, false)
        );
    }

    #[test]
    fn a_delay_past_the_window_is_shortened_to_end_there() {
        let received = Instant::now();
        let end = received + MAX_VISIBILITY;
        let now = received + secs(11 * 3600);
        // One hour is left in the window: two hours are cut to one.
        assert_eq!(visibility_seconds(secs(7200), end, now), (3600, true));
        // Exactly what is left is not shortened.
        assert_eq!(visibility_seconds(secs(3600), end, now), (3600, false));
    }

    #[test]
    fn the_rest_of_the_window_rounds_down() {
        let received = Instant::now();
        let end = received + MAX_VISIBILITY;
        let now = end - Duration::from_millis(2500);
        assert_eq!(visibility_seconds(secs(10), end, now), (2, true));
    }

    #[test]
    fn after_the_window_the_visibility_is_zero() {
        let received = Instant::now();
        let end = received + MAX_VISIBILITY;
        assert_eq!(visibility_seconds(secs(30), end, end + secs(5)), (0, true));
        assert_eq!(
            visibility_seconds(Duration::ZERO, end, end + secs(5)),
            (0, false)
        );
    }

    #[test]
    fn no_visibility_exceeds_twelve_hours() {
        let now = Instant::now();
        let end = now + secs(100 * 3600);
        assert_eq!(
            visibility_seconds(secs(13 * 3600), end, now),
            (43_200, true)
        );
    }

    #[test]
    fn the_longest_delay_saturates_to_the_window_instead_of_wrapping_to_none() {
        let received = Instant::now();
        let end = received + MAX_VISIBILITY;
        assert_eq!(
            visibility_seconds(Duration::MAX, end, received),
            (43_200, true)
        );
        let later = received + secs(3600);
        assert_eq!(
            visibility_seconds(Duration::MAX, end, later),
            (39_600, true)
        );
        assert_eq!(ceil_seconds(Duration::MAX), u64::MAX);
        assert_eq!(ceil_seconds(Duration::new(u64::MAX - 1, 1)), u64::MAX);
    }

    proptest! {
        #[test]
        fn a_message_never_comes_back_early_nor_past_its_window(
            delay_ms in prop_oneof![0u64..50_000_000, Just(u64::MAX)],
            elapsed_ms in 0u64..45_000_000,
        ) {
            let received = Instant::now();
            let end = received + MAX_VISIBILITY;
            let now = received + Duration::from_millis(elapsed_ms);
            let delay = Duration::from_millis(delay_ms);
            let (seconds, shortened) = visibility_seconds(delay, end, now);
            let back_at = now + secs(u64::from(seconds));
            // Never past the window.
            prop_assert!(back_at <= end.max(now));
            if shortened {
                prop_assert!(secs(u64::from(seconds)) < delay);
            } else {
                // Never earlier than asked.
                prop_assert!(secs(u64::from(seconds)) >= delay);
                prop_assert!(secs(u64::from(seconds)) < delay + secs(1));
            }
        }
    }
}
