//! [`Parked`]: the messages this engine returned to the queue with a delay, until the delay
//! ends; the `sqs_engine_messages_parked` gauge.
//!
//! A `RetryAfter(d)` settlement makes its message invisible for `d` (whole seconds, rounded up):
//! SQS counts it in `ApproximateNumberOfMessagesNotVisible`, "in flight", though no consumer
//! holds it. What the engine can know of it: that SQS applied the visibility change (the
//! entry's answer), and when the delay ends. It counts a message as parked from that answer
//! until the delay, counted from the answer, has passed. The count is an upper bound:
//!
//! - SQS started the delay when it applied the change, up to a round trip before the answer;
//! - a delay reaching past 12 hours from the receive was shortened by the engine to end there
//!   (the gauge keeps the delay asked for);
//! - a message is parked only for the engine that parked it, and only while it runs: a process
//!   that stops takes its count with it, though its messages stay parked in SQS.
//!
//! Nothing else makes a parked message visible early: its receipt handle is the engine's alone,
//! and the engine is done with the delivery.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use metrics::Gauge;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::sqs::sleep::sleep_until_or_forever;
use crate::sqs::whole_seconds::ceil_seconds;

/// The parked messages of one queue: when each delay ends, earliest first, and the gauge.
///
/// Parking and expiring take one lock and push or pop a binary heap, whose storage is reused:
/// nothing is allocated per message once it has grown to the most messages parked at once.
#[derive(Debug)]
pub(crate) struct Parked {
    /// When each parked message's delay ends.
    ends: Mutex<BinaryHeap<Reverse<Instant>>>,
    gauge: Gauge,
    /// Wakes [`expire`] when a delay ends before the one it sleeps for.
    earlier: Notify,
}

impl Parked {
    pub(crate) fn new(gauge: Gauge) -> Self {
        Self {
            ends: Mutex::new(BinaryHeap::new()),
            gauge,
            earlier: Notify::new(),
        }
    }

    fn ends(&self) -> std::sync::MutexGuard<'_, BinaryHeap<Reverse<Instant>>> {
        // Plain data, and no code under the lock panics; a poisoned lock still holds it.
        self.ends.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// SQS applied a visibility change of `delay` (rounded up to whole seconds, as the engine
    /// sends it) just now: the message is parked until it ends. A zero delay parks nothing.
    pub(crate) fn park(&self, delay: Duration) {
        let seconds = ceil_seconds(delay);
        if seconds == 0 {
            return;
        }
        let now = Instant::now();
        let end = now
            .checked_add(Duration::from_secs(seconds))
            .unwrap_or_else(|| now + crate::MAX_VISIBILITY);
        let wake = {
            let mut ends = self.ends();
            // Expired ones go first, so that the heap stays bounded without the task too.
            self.expire_locked(&mut ends, now);
            let wake = ends.peek().is_none_or(|Reverse(first)| end < *first);
            ends.push(Reverse(end));
            wake
        };
        self.gauge.increment(1.0);
        if wake {
            self.earlier.notify_one();
        }
    }

    /// Counts out the messages whose delay ended by `now`; returns when the next one ends.
    fn expire_at(&self, now: Instant) -> Option<Instant> {
        let mut ends = self.ends();
        self.expire_locked(&mut ends, now);
        ends.peek().map(|Reverse(end)| *end)
    }

    fn expire_locked(&self, ends: &mut BinaryHeap<Reverse<Instant>>, now: Instant) {
        let mut ended = 0u32;
        while ends.peek().is_some_and(|Reverse(end)| *end <= now) {
            ends.pop();
            ended += 1;
        }
        if ended > 0 {
            self.gauge.decrement(f64::from(ended));
        }
    }

    /// Counts out every message still parked: the consumer stops, and with it the count.
    fn clear(&self) {
        let mut ends = self.ends();
        let left = ends.len();
        ends.clear();
        #[allow(clippy::cast_precision_loss)]
        self.gauge.decrement(left as f64);
    }
}

/// Counts out parked messages as their delays end, until `stop` is cancelled; then counts out
/// the rest (their messages stay parked in SQS, but no longer for this consumer's gauge).
///
/// # Cancel safety
///
/// Cancel safe: dropping it only stops the counting; [`Parked::park`] still counts out what
/// ended whenever it parks another message.
pub(crate) async fn expire(parked: std::sync::Arc<Parked>, stop: CancellationToken) {
    loop {
        let next = parked.expire_at(Instant::now());
        tokio::select! {
            biased;
            () = stop.cancelled() => {
                parked.clear();
                return;
            }
            () = parked.earlier.notified() => {}
            () = sleep_until_or_forever(next) => {}
        }
    }
}

// Paused-clock tests: the delays are timers, and tokio's paused clock moves them exactly.
#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
    use tokio_util::sync::CancellationToken;

    use super::expire;
    use crate::handle::outcome::Outcome;
    use crate::metrics::{QueueMetrics, StatsCells};
    use crate::sqs::lane::Lane;

    /// A queue's metrics on a recorder of their own, with the task that counts out parked
    /// messages running.
    struct Recorded {
        metrics: QueueMetrics,
        snapshotter: Snapshotter,
        /// The gauge's value: the recorder hands out how far it moved and zeroes it.
        parked: f64,
        stop: CancellationToken,
    }

    impl Recorded {
        fn start() -> Self {
            let recorder = DebuggingRecorder::new();
            let snapshotter = recorder.snapshotter();
            let metrics = metrics::with_local_recorder(&recorder, || {
                QueueMetrics::new("parked-test", Arc::new(StatsCells::default()))
            });
            let stop = CancellationToken::new();
            tokio::spawn(expire(Arc::clone(metrics.parked()), stop.clone()));
            Self {
                metrics,
                snapshotter,
                parked: 0.0,
                stop,
            }
        }

        fn settled(&self, outcome: Outcome, ok: bool) {
            self.metrics.settled(&outcome, ok, Lane::Visibility, 0.0);
        }

        fn parked(&mut self) -> f64 {
            self.parked += moved(&self.snapshotter, "sqs_engine_messages_parked");
            self.parked
        }
    }

    async fn after(delay: Duration) {
        tokio::time::sleep(delay).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_after_applied_is_parked_until_its_delay_in_whole_seconds_ends() {
        let mut recorded = Recorded::start();
        recorded.settled(Outcome::RetryAfter(Duration::from_millis(2_500)), true);
        assert_eq!(recorded.parked(), 1.0);
        after(Duration::from_millis(2_900)).await;
        assert_eq!(recorded.parked(), 1.0, "sent as 3 s: still invisible");
        after(Duration::from_millis(200)).await;
        assert_eq!(recorded.parked(), 0.0, "visible again after 3 s");
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_delay_sqs_applied_parks_a_message() {
        let mut recorded = Recorded::start();
        recorded.settled(Outcome::RetryAfter(Duration::from_secs(5)), false);
        recorded.settled(Outcome::RetryAfter(Duration::ZERO), true);
        recorded.settled(Outcome::Retry, true);
        recorded.settled(Outcome::Ack, true);
        recorded.settled(Outcome::Drop, true);
        assert_eq!(recorded.parked(), 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_shorter_delay_parked_later_is_counted_out_first() {
        let mut recorded = Recorded::start();
        recorded.settled(Outcome::RetryAfter(Duration::from_secs(60)), true);
        after(Duration::from_secs(1)).await;
        recorded.settled(Outcome::RetryAfter(Duration::from_secs(2)), true);
        recorded.settled(Outcome::RetryAfter(Duration::from_secs(2)), true);
        assert_eq!(recorded.parked(), 3.0);
        after(Duration::from_millis(2_500)).await;
        assert_eq!(recorded.parked(), 1.0, "the two 2 s delays ended at 3 s");
        after(Duration::from_secs(57)).await;
        assert_eq!(recorded.parked(), 0.0, "the 60 s one at 60 s");
    }

    /// How far the gauge `name` moved since the last snapshot (which zeroes it).
    fn moved(snapshotter: &Snapshotter, name: &str) -> f64 {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter_map(|(key, _, _, value)| match value {
                DebugValue::Gauge(moved) if key.key().name() == name => Some(moved.into_inner()),
                _ => None,
            })
            .sum()
    }

    /// The whole path: a consumer on the in-process SQS, a `RetryAfter` settled, and its
    /// gauges on a recorder of this thread (a current-thread runtime: every task runs here).
    #[cfg(feature = "testing")]
    #[tokio::test(start_paused = true)]
    async fn a_consumer_counts_a_message_it_returned_with_a_delay_as_parked_not_held() {
        use crate::testing::InProcessSqs;

        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let _local = metrics::set_default_local_recorder(&recorder);
        let (mut parked, mut held) = (0.0, 0.0);
        let read = |parked: &mut f64, held: &mut f64| {
            // One snapshot zeroes every gauge: read both from it.
            let snapshot = snapshotter.snapshot().into_vec();
            for (key, _, _, value) in snapshot {
                if let DebugValue::Gauge(moved) = value {
                    match key.key().name() {
                        "sqs_engine_messages_parked" => *parked += moved.into_inner(),
                        "sqs_engine_messages_in_flight" => *held += moved.into_inner(),
                        _ => {}
                    }
                }
            }
        };

        let sqs = InProcessSqs::new();
        sqs.send("parked-orders", "later").expect("sent");
        let mut consumer =
            crate::testing::unit::consumer(&sqs, "parked-orders", |engine| engine.heartbeat(false))
                .await;
        let delivery = consumer.recv().await.expect("the message");
        delivery
            .settle(Outcome::RetryAfter(Duration::from_secs(30)))
            .await
            .expect("applied");
        read(&mut parked, &mut held);
        assert_eq!((parked, held), (1.0, 0.0), "parked, and held by no one");
        assert_eq!(
            sqs.counts("parked-orders").in_flight,
            1,
            "SQS counts it in flight all the same"
        );
        after(Duration::from_secs(29)).await;
        read(&mut parked, &mut held);
        assert_eq!(parked, 1.0);
        after(Duration::from_secs(2)).await;
        read(&mut parked, &mut held);
        assert_eq!(parked, 0.0, "visible again after 30 s");

        let handle = consumer.handle();
        consumer.close().await;
        handle.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_count_ends_with_the_consumer() {
        let mut recorded = Recorded::start();
        recorded.settled(Outcome::RetryAfter(Duration::from_secs(600)), true);
        recorded.settled(Outcome::RetryAfter(Duration::from_secs(30)), true);
        assert_eq!(recorded.parked(), 2.0);
        recorded.stop.cancel();
        tokio::task::yield_now().await;
        assert_eq!(recorded.parked(), 0.0);
    }
}
