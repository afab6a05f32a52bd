//! Delays in whole seconds, the unit SQS takes visibility timeouts and delays in.

use std::time::Duration;

/// Whole seconds, rounded up; saturating, so that `Duration::MAX` stays the longest delay
/// rather than wrapping round to none.
pub(crate) fn ceil_seconds(delay: Duration) -> u64 {
    if crate::defect!(RetryAfterRoundedDown) {
        return delay.as_secs();
    }
    delay
        .as_secs()
        .saturating_add(u64::from(delay.subsec_nanos() > 0))
}
