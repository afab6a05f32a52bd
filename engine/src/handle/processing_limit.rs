//! How long a message may be worked on: a deadline on the handler
//! ([`max_processing_time`](crate::EngineBuilder::max_processing_time)), after which it is
//! cancelled and its message settled by a chosen policy, and a cap on how long the heartbeat
//! keeps a message invisible ([`max_extension`](crate::EngineBuilder::max_extension)), so
//! that a hung handler does not hold its message for SQS's 12 hours.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ConfigError;
use crate::handle::error_policy::HandlerErrorPolicy;
use crate::limits::MAX_VISIBILITY;

/// The shortest deadline or cap accepted: SQS counts visibility in whole seconds.
const SHORTEST: Duration = Duration::from_secs(1);

/// The limits one queue's handlers and heartbeat keep to; none by default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProcessingLimit {
    /// How long a handler may run before it is cancelled.
    pub(crate) max_processing_time: Option<Duration>,
    /// How a message whose handler was cancelled at the deadline is settled.
    pub(crate) on_timeout: HandlerErrorPolicy,
    /// How long after its receive the heartbeat may keep a message invisible.
    pub(crate) max_extension: Option<Duration>,
}

impl ProcessingLimit {
    /// The limits, checked: each at least 1 s and at most 12 hours, and a handler's deadline no
    /// longer than the extension cap (a handler past the cap would run with its message visible
    /// to other consumers).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_processing_time` or `max_extension`.
    pub(crate) fn new(
        max_processing_time: Option<Duration>,
        on_timeout: HandlerErrorPolicy,
        max_extension: Option<Duration>,
    ) -> Result<Self, ConfigError> {
        for (setting, value) in [
            ("max_processing_time", max_processing_time),
            ("max_extension", max_extension),
        ] {
            if let Some(value) = value
                && !(SHORTEST..=MAX_VISIBILITY).contains(&value)
            {
                return Err(ConfigError::duration(setting, value, "1 s..=12 h"));
            }
        }
        if let (Some(processing), Some(extension)) = (max_processing_time, max_extension)
            && processing > extension
        {
            return Err(ConfigError::duration(
                "max_processing_time",
                processing,
                "at most max_extension, or the message lapses while its handler runs",
            ));
        }
        Ok(Self {
            max_processing_time,
            on_timeout: on_timeout.validated()?,
            max_extension,
        })
    }

    /// Runs `handling` to its end, or until the deadline: `None` when it was cancelled there
    /// (dropped, so whatever it held is released).
    pub(crate) async fn within<T>(&self, handling: impl Future<Output = T>) -> Option<T> {
        match self.max_processing_time {
            Some(limit) => tokio::time::timeout(limit, handling).await.ok(),
            None => Some(handling.await),
        }
    }

    /// The latest moment the heartbeat may keep a message received at `received_at` invisible:
    /// `window_end` (12 hours from the receive), or sooner under the cap.
    pub(crate) fn extension_end(&self, received_at: Instant, window_end: Instant) -> Instant {
        self.max_extension
            .map_or(window_end, |cap| window_end.min(received_at + cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Outcome;

    fn limit(processing: Option<u64>, extension: Option<u64>) -> Result<ProcessingLimit, String> {
        ProcessingLimit::new(
            processing.map(Duration::from_secs),
            HandlerErrorPolicy::default(),
            extension.map(Duration::from_secs),
        )
        .map_err(|error| error.to_string())
    }

    #[test]
    fn limits_outside_one_second_to_twelve_hours_are_refused_by_name() {
        assert!(limit(Some(1), Some(43_200)).is_ok());
        assert!(limit(None, None).is_ok());
        let zero = limit(Some(0), None).expect_err("refused");
        assert!(zero.contains("max_processing_time"), "{zero}");
        let long = limit(None, Some(43_201)).expect_err("refused");
        assert!(long.contains("max_extension"), "{long}");
    }

    #[test]
    fn a_deadline_past_the_extension_cap_is_refused() {
        let error = limit(Some(600), Some(300)).expect_err("refused");
        assert!(
            error.contains("max_processing_time") && error.contains("max_extension"),
            "{error}"
        );
        assert!(limit(Some(300), Some(300)).is_ok());
    }

    #[test]
    fn the_timeout_policy_is_checked_like_the_error_policy() {
        let refused = ProcessingLimit::new(
            Some(Duration::from_secs(5)),
            crate::ErrorBackoff::new(Duration::ZERO, Duration::from_secs(60)).into(),
            None,
        );
        assert!(refused.is_err());
        assert!(
            ProcessingLimit::new(Some(Duration::from_secs(5)), Outcome::Drop.into(), None).is_ok()
        );
    }

    #[test]
    fn the_extension_ends_at_the_cap_or_the_twelve_hour_window_whichever_is_sooner() {
        let received = Instant::now();
        let window = received + MAX_VISIBILITY;
        let none = ProcessingLimit::default();
        assert_eq!(none.extension_end(received, window), window);
        let capped = limit(None, Some(600)).expect("valid");
        assert_eq!(
            capped.extension_end(received, window),
            received + Duration::from_secs(600)
        );
        // A FIFO retry's window counts from its first call, which may end before the cap.
        let early = received + Duration::from_secs(60);
        assert_eq!(capped.extension_end(received, early), early);
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_past_its_deadline_is_cancelled_and_one_within_it_finishes() {
        // A paused clock: the deadlines pass without real waiting.
        let limited = limit(Some(10), None).expect("valid");
        let slow = limited
            .within(tokio::time::sleep(Duration::from_secs(11)))
            .await;
        assert_eq!(slow, None);
        let quick = limited
            .within(async {
                tokio::time::sleep(Duration::from_secs(9)).await;
                7
            })
            .await;
        assert_eq!(quick, Some(7));
        let unlimited = ProcessingLimit::default()
            .within(async {
                tokio::time::sleep(Duration::from_secs(86_400)).await;
                1
            })
            .await;
        assert_eq!(unlimited, Some(1));
    }
}
