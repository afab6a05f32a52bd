//! [`SqsQueue`]: the subscription descriptor, and how names become SQS queue names.

use std::borrow::Cow;
use std::num::NonZeroU32;
use std::time::Duration;

use ::ruststream::FromName;
use ::ruststream::runtime::{Declared, SubscriberBuilder, SubscriberSettings as _};

use super::error::SqsError;
use crate::bounded::{MaxReceiveCount, WaitTime};
use crate::engine::DEFAULT_RECEIVERS;
use crate::limits::MAX_QUEUE_NAME_LEN;
use crate::queue_url::is_url;

/// The SQS queue name for a logical name: every character SQS refuses in a queue name (all but
/// ASCII letters, digits, `-` and `_`) becomes `-`, and a `.fifo` suffix is kept. A queue URL
/// is passed through unchanged.
///
/// ```
/// use sqs_engine::ruststream::queue_name;
///
/// assert_eq!(queue_name("orders.eu"), "orders-eu");
/// assert_eq!(queue_name("orders.eu.fifo"), "orders-eu.fifo");
/// assert_eq!(queue_name("http://localhost:4566/000000000000/a.b"), "http://localhost:4566/000000000000/a.b");
/// ```
pub fn queue_name(name: &str) -> Cow<'_, str> {
    if is_url(name) {
        return Cow::Borrowed(name);
    }
    let (stem, suffix) = match name.strip_suffix(".fifo") {
        Some(stem) => (stem, ".fifo"),
        None => (name, ""),
    };
    let legal = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if stem.chars().all(legal) {
        return Cow::Borrowed(name);
    }
    let mut mapped: String = stem
        .chars()
        .map(|c| if legal(c) { c } else { '-' })
        .collect();
    mapped.push_str(suffix);
    Cow::Owned(mapped)
}

pub(crate) use crate::queue_url::is_fifo;

/// A subscription to one SQS queue: the descriptor that sits in `#[subscriber(..)]` or in
/// `.map_source(..)`.
///
/// ```
/// use std::time::Duration;
/// use sqs_engine::prelude::*;
///
/// let orders = SqsQueue::new("orders")
///     .create_if_missing()
///     .wait(Duration::from_secs(10))
///     .visibility(Duration::from_secs(60));
/// assert_eq!(orders.queue(), "orders");
/// ```
///
/// A name ending in `.fifo` is a FIFO queue. A retry never leaves the queue (SQS moves a spent
/// message to the dead-letter queue itself), so the descriptor has `Copies = BrokerMoves`:
/// `.out_retry(..)` does not compile on it.
///
/// The defaults fit an idle queue and a busy one on a real network alike: the engine's
/// adaptive receivers (one long poll on an idle queue, as many as the round trip needs while
/// receives come back full, up to 128), a 20 s wait, the queue's own visibility timeout, and a
/// receive per receiver held ahead of the framework's workers, which take as many at once as
/// their `workers(n)` allows. A FIFO queue's groups keep their order whatever the number of
/// receivers; for a standard queue, which promises no order, [`receivers`](Self::receivers)
/// `(1)` hands messages out in the order SQS returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct SqsQueue {
    pub(crate) queue: String,
    pub(crate) wait: Duration,
    pub(crate) visibility: Option<Duration>,
    pub(crate) create_if_missing: bool,
    pub(crate) receivers: usize,
    pub(crate) max_in_flight: usize,
    pub(crate) batch_window: Duration,
    pub(crate) heartbeat: bool,
    pub(crate) max_attempts: Option<NonZeroU32>,
    pub(crate) dead_letter: Option<String>,
    /// The receive rate cap's `f64` bits, so that the descriptor stays `Eq`.
    pub(crate) max_receive_rate: Option<u64>,
}

/// The default cap on deliveries handed out and unsettled: high enough that the framework's
/// `workers(n)` is what bounds them.
const DEFAULT_MAX_IN_FLIGHT: usize = 1_000;

impl SqsQueue {
    /// The queue, by name or URL. Characters SQS refuses in a name become `-`; see
    /// [`queue_name`].
    pub fn new(queue: impl Into<String>) -> Self {
        Self {
            queue: queue.into(),
            wait: WaitTime::MAX,
            visibility: None,
            create_if_missing: false,
            receivers: DEFAULT_RECEIVERS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            batch_window: Duration::from_millis(100),
            heartbeat: true,
            max_attempts: None,
            dead_letter: None,
            max_receive_rate: None,
        }
    }

    /// The queue as named.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The long-poll wait of each receive, up to 20 s. Default 20 s, the fewest empty
    /// receives.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The visibility timeout of each receive, 1 s to 12 hours, rounded up to whole seconds.
    /// Default: the queue's own. The engine's heartbeat extends it while a message is handled.
    pub fn visibility(mut self, timeout: Duration) -> Self {
        self.visibility = Some(timeout);
        self
    }

    /// Creates the queue, and its dead-letter queue, when they do not exist. A `.fifo` name
    /// makes a FIFO queue.
    pub fn create_if_missing(mut self) -> Self {
        self.create_if_missing = true;
        self
    }

    /// The most long-poll receivers on the queue, 1..=256 (the engine runs as many as keep
    /// up). Default 128. One keeps the order SQS hands a standard queue's messages out in;
    /// more receive faster and may reorder them.
    pub fn receivers(mut self, receivers: usize) -> Self {
        self.receivers = receivers;
        self
    }

    /// Deliveries handed out and not yet settled that the subscription allows, beyond which
    /// it stops receiving, 1..=100 000. Default 1,000: what normally bounds them is the
    /// framework's `workers(n)`, which takes a delivery only when a worker is free; this is a
    /// cap on top of it. Messages received ahead of the workers are one receive per receiver,
    /// whatever this is.
    pub fn max_in_flight(mut self, deliveries: usize) -> Self {
        self.max_in_flight = deliveries;
        self
    }

    /// How long a batch subscription waits for a batch to fill once its first message is in,
    /// up to 1 s. Default 100 ms.
    pub fn batch_window(mut self, window: Duration) -> Self {
        self.batch_window = window;
        self
    }

    /// Whether the engine's heartbeat keeps a delivery invisible while it is handled. Default
    /// on.
    pub fn heartbeat(mut self, on: bool) -> Self {
        self.heartbeat = on;
        self
    }

    /// The most messages a second the subscription receives, 0.01..=1,000,000: for handlers
    /// that call something rate-limited, so that nothing waits in the prefetch for the rate.
    /// Default: none. See
    /// [`EngineBuilder::max_receive_rate`](crate::EngineBuilder::max_receive_rate).
    pub fn max_receive_rate(mut self, per_second: f64) -> Self {
        self.max_receive_rate = Some(per_second.to_bits());
        self
    }

    /// The receive rate cap, in messages a second.
    pub(crate) fn receive_rate(&self) -> Option<f64> {
        self.max_receive_rate.map(f64::from_bits)
    }

    /// The redrive policy the subscription writes onto the queue: after `max_attempts`
    /// receives, SQS moves a message to `dead_letter`. The mount site's
    /// `.max_attempts(..).dead_letter(..)` sets the same.
    pub fn redrive(mut self, max_attempts: NonZeroU32, dead_letter: impl Into<String>) -> Self {
        self.max_attempts = Some(max_attempts);
        self.dead_letter = Some(dead_letter.into());
        self
    }

    /// Checks the halves of the redrive policy and the ranges of the settings.
    pub(crate) fn validate(&self) -> Result<(), SqsError> {
        let invalid =
            |reason: String| SqsError::InvalidQueue(format!("queue `{}`: {reason}", self.queue));
        check_redrive(&self.queue, self.max_attempts, self.dead_letter.as_deref())?;
        if self.queue.is_empty() {
            return Err(invalid("the queue name is empty".into()));
        }
        if !is_url(&self.queue) && queue_name(&self.queue).len() > MAX_QUEUE_NAME_LEN {
            return Err(invalid(format!(
                "SQS queue names have at most {MAX_QUEUE_NAME_LEN} characters"
            )));
        }
        if self.wait > WaitTime::MAX {
            return Err(invalid(format!(
                "wait is {:?}: SQS long-polls for at most {} seconds",
                self.wait,
                WaitTime::MAX.as_secs()
            )));
        }
        if let Some(visibility) = self.visibility
            && (visibility < Duration::from_secs(1) || visibility > crate::MAX_VISIBILITY)
        {
            return Err(invalid(format!(
                "visibility is {visibility:?}, 1 s to 12 hours"
            )));
        }
        if self.batch_window > Duration::from_secs(1) {
            return Err(invalid(format!(
                "batch_window is {:?}, at most 1 s",
                self.batch_window
            )));
        }
        if let Some(rate) = self.receive_rate()
            && let Err(error) = crate::receive::receive_rate::MaxReceiveRate::new(rate)
        {
            return Err(invalid(error.to_string()));
        }
        if let Some(attempts) = self.max_attempts
            && !MaxReceiveCount::contains(attempts.get())
        {
            return Err(invalid(format!(
                "max_attempts is {attempts}, SQS allows {}",
                MaxReceiveCount::RANGE
            )));
        }
        Ok(())
    }

    /// The visibility in whole seconds, rounded up.
    pub(crate) fn visibility_secs(&self) -> Option<Duration> {
        self.visibility.map(|visibility| {
            let secs = visibility.as_secs() + u64::from(visibility.subsec_nanos() > 0);
            Duration::from_secs(secs)
        })
    }
}

/// Both halves of a redrive policy, or neither.
pub(crate) fn check_redrive(
    queue: &str,
    max_attempts: Option<NonZeroU32>,
    dead_letter: Option<&str>,
) -> Result<(), SqsError> {
    match (max_attempts, dead_letter) {
        (Some(_), None) => Err(SqsError::IncompleteRedrive {
            queue: queue.to_owned(),
            declared: "max_attempts(..)",
            missing: "dead_letter(..)",
        }),
        (None, Some(_)) => Err(SqsError::IncompleteRedrive {
            queue: queue.to_owned(),
            declared: "dead_letter(..)",
            missing: "max_attempts(..)",
        }),
        _ => Ok(()),
    }
}

/// The [`SqsQueue`] settings, chained at the mount site after the framework's own steps: the
/// same as `.map_source(|queue| queue.wait(..))`, one method a setting. The name and methods are
/// those of `ruststream-sqs-sns`, so a service that sets them at the mount site moves over with
/// its `use` line; `receivers`, `max_in_flight`, `batch_window`, `heartbeat` and
/// `max_receive_rate` are this broker's own.
///
/// ```
/// use std::time::Duration;
///
/// use serde::Deserialize;
/// use sqs_engine::prelude::*;
///
/// #[derive(Deserialize)]
/// struct Order {
///     id: u64,
/// }
///
/// #[subscriber(SqsQueue::new("orders"))]
/// async fn ship(orders: &[Order]) -> HandlerOutcome {
///     tracing::info!(first = orders[0].id, count = orders.len(), "shipping");
///     HandlerOutcome::ack()
/// }
///
/// fn service() -> RustStream {
///     RustStream::new(AppInfo::new("orders", "0.1.0")).with_broker(SqsBroker::new(), |b| {
///         b.include(
///             ship.batch(nonzero!(10))
///                 .wait(Duration::from_secs(10))
///                 .visibility(Duration::from_secs(120))
///                 .create_if_missing()
///                 .receivers(4),
///         );
///     })
/// }
/// # let _ = service;
/// ```
pub trait SqsSubscription: Sized {
    /// See [`SqsQueue::wait`].
    #[must_use]
    fn wait(self, wait: Duration) -> Self;

    /// See [`SqsQueue::visibility`].
    #[must_use]
    fn visibility(self, timeout: Duration) -> Self;

    /// See [`SqsQueue::create_if_missing`].
    #[must_use]
    fn create_if_missing(self) -> Self;

    /// See [`SqsQueue::receivers`].
    #[must_use]
    fn receivers(self, receivers: usize) -> Self;

    /// See [`SqsQueue::max_in_flight`].
    #[must_use]
    fn max_in_flight(self, deliveries: usize) -> Self;

    /// See [`SqsQueue::batch_window`].
    #[must_use]
    fn batch_window(self, window: Duration) -> Self;

    /// See [`SqsQueue::heartbeat`].
    #[must_use]
    fn heartbeat(self, on: bool) -> Self;

    /// See [`SqsQueue::max_receive_rate`].
    #[must_use]
    fn max_receive_rate(self, per_second: f64) -> Self;
}

impl<Def, State, DefCodec> SqsSubscription for SubscriberBuilder<Def, SqsQueue, State, DefCodec>
where
    Def: Declared,
{
    fn wait(self, wait: Duration) -> Self {
        self.map_source(|queue| queue.wait(wait))
    }

    fn visibility(self, timeout: Duration) -> Self {
        self.map_source(|queue| queue.visibility(timeout))
    }

    fn create_if_missing(self) -> Self {
        self.map_source(SqsQueue::create_if_missing)
    }

    fn receivers(self, receivers: usize) -> Self {
        self.map_source(|queue| queue.receivers(receivers))
    }

    fn max_in_flight(self, deliveries: usize) -> Self {
        self.map_source(|queue| queue.max_in_flight(deliveries))
    }

    fn batch_window(self, window: Duration) -> Self {
        self.map_source(|queue| queue.batch_window(window))
    }

    fn heartbeat(self, on: bool) -> Self {
        self.map_source(|queue| queue.heartbeat(on))
    }

    fn max_receive_rate(self, per_second: f64) -> Self {
        self.map_source(|queue| queue.max_receive_rate(per_second))
    }
}

impl FromName for SqsQueue {
    fn from_name(name: impl Into<Cow<'static, str>>) -> Self {
        Self::new(name.into().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_sqs_refuses_become_dashes_and_fifo_is_kept() {
        assert_eq!(queue_name("payments"), "payments");
        assert_eq!(
            queue_name("conformance.lifecycle.1a-2b-3"),
            "conformance-lifecycle-1a-2b-3"
        );
        assert_eq!(queue_name("a b/c.fifo"), "a-b-c.fifo");
        assert_eq!(queue_name("under_score-ok"), "under_score-ok");
        let url = "https://sqs.us-east-1.amazonaws.com/123456789012/a.b";
        assert_eq!(queue_name(url), url);
    }

    #[test]
    fn a_half_redrive_policy_names_the_missing_half() {
        let err = check_redrive("q", NonZeroU32::new(3), None).expect_err("half a policy");
        assert!(err.to_string().contains("dead_letter(..)"), "{err}");
        let err = check_redrive("q", None, Some("dlq")).expect_err("half a policy");
        assert!(err.to_string().contains("max_attempts(..)"), "{err}");
        assert!(check_redrive("q", None, None).is_ok());
        assert!(check_redrive("q", NonZeroU32::new(3), Some("dlq")).is_ok());
    }

    #[test]
    fn the_visibility_is_rounded_up_to_whole_seconds() {
        let queue = SqsQueue::new("q").visibility(Duration::from_millis(1500));
        assert_eq!(queue.visibility_secs(), Some(Duration::from_secs(2)));
        assert!(queue.validate().is_ok());
        assert!(
            SqsQueue::new("q")
                .visibility(Duration::from_millis(10))
                .validate()
                .is_err()
        );
    }

    #[test]
    fn a_receive_rate_out_of_range_is_refused_by_name_and_one_in_range_kept() {
        let capped = SqsQueue::new("q").max_receive_rate(12.5);
        assert_eq!(capped.receive_rate(), Some(12.5));
        assert!(capped.validate().is_ok());
        for bad in [0.0, f64::NAN, 5e6] {
            let error = SqsQueue::new("q")
                .max_receive_rate(bad)
                .validate()
                .expect_err("refused");
            assert!(
                error.to_string().contains("max_receive_rate"),
                "{bad}: {error}"
            );
        }
    }
}
