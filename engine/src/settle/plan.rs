//! What an outcome becomes on SQS: the settlement decision, as a pure function.
//!
//! Which call (`DeleteMessageBatch` or `ChangeMessageVisibilityBatch`), with which visibility,
//! whether a drop at the redrive cap returns the message for the dead-letter queue, and whether
//! a `retry_after` had to be shortened to end within 12 hours of the receive. No clock is read
//! and nothing is logged here: the caller passes `now` in and reports what the plan says.

use std::time::Duration;

use tokio::time::Instant;

use super::visibility::VisibilityTarget;
use crate::handle::outcome::Outcome;
use crate::sqs::lane::Lane;

/// The call one settlement makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The batch call the entry goes out in.
    pub(crate) lane: Lane,
    /// The visibility asked for, on the visibility lane.
    pub(crate) visibility: Option<VisibilityTarget>,
    /// A drop at the redrive cap: the message is returned so SQS moves it to the dead-letter
    /// queue, instead of being deleted.
    pub(crate) redrive: bool,
    /// The visibility asked for reaches past the 12 hours from the receive and is shortened to
    /// end there (worked out at `now`).
    pub(crate) shortened: bool,
}

/// The settlement of `outcome` for a delivery at `receive_count`, on a queue whose redrive
/// policy moves a message after `cap` receives (if it has one), whose 12-hour window ends at
/// `window_end`, decided at `now`.
pub(crate) fn plan(
    outcome: Outcome,
    receive_count: u32,
    cap: Option<u32>,
    window_end: Instant,
    now: Instant,
) -> Plan {
    let at_cap = cap.is_some_and(|cap| receive_count >= cap);
    let (lane, delay, redrive) = match outcome {
        Outcome::Ack => (Lane::Delete, None, false),
        Outcome::Drop if at_cap => (Lane::Visibility, Some(Duration::ZERO), true),
        Outcome::Drop => (Lane::Delete, None, false),
        Outcome::Retry => (Lane::Visibility, Some(Duration::ZERO), false),
        Outcome::RetryAfter(delay) => (Lane::Visibility, Some(delay), false),
    };
    let visibility = delay.map(|delay| VisibilityTarget { delay, window_end });
    let shortened = visibility.is_some_and(|target| target.seconds_at(now).1);
    Plan {
        lane,
        visibility,
        redrive,
        shortened,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MAX_VISIBILITY;

    fn at(outcome: Outcome, receive_count: u32, cap: Option<u32>) -> Plan {
        let now = Instant::now();
        plan(outcome, receive_count, cap, now + MAX_VISIBILITY, now)
    }

    fn seconds(plan: &Plan) -> Option<u32> {
        let now = Instant::now();
        plan.visibility.map(|target| target.seconds_at(now).0)
    }

    #[test]
    fn ack_deletes_and_drop_deletes_below_the_cap() {
        for plan in [
            at(Outcome::Ack, 1, None),
            at(Outcome::Ack, 5, Some(3)),
            at(Outcome::Drop, 1, None),
            at(Outcome::Drop, 2, Some(3)),
        ] {
            assert_eq!(plan.lane, Lane::Delete);
            assert_eq!(plan.visibility, None);
            assert!(!plan.redrive);
        }
    }

    #[test]
    fn a_drop_at_or_past_the_cap_returns_the_message_for_the_dead_letter_queue() {
        for count in [3, 4] {
            let plan = at(Outcome::Drop, count, Some(3));
            assert_eq!(plan.lane, Lane::Visibility);
            assert_eq!(seconds(&plan), Some(0));
            assert!(plan.redrive);
        }
    }

    #[test]
    fn retry_is_visibility_zero_and_retry_after_its_delay_rounded_up() {
        assert_eq!(seconds(&at(Outcome::Retry, 1, None)), Some(0));
        let plan = at(
            Outcome::RetryAfter(Duration::from_millis(1_500)),
            1,
            Some(1),
        );
        assert_eq!(plan.lane, Lane::Visibility);
        assert_eq!(seconds(&plan), Some(2));
        assert!(!plan.redrive, "a retry at the cap is still a retry");
        assert!(!plan.shortened);
    }

    #[test]
    fn a_retry_after_past_the_window_is_shortened_and_says_so() {
        let received = Instant::now();
        let now = received + Duration::from_secs(11 * 3600);
        let plan = plan(
            Outcome::RetryAfter(Duration::MAX),
            1,
            None,
            received + MAX_VISIBILITY,
            now,
        );
        assert!(plan.shortened);
        assert_eq!(plan.visibility.map(|t| t.seconds_at(now).0), Some(3600));
    }
}
