//! Long-poll receivers: each loops on `ReceiveMessage` while the engine has room for a batch.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use crate::api::{CallErrorKind, ReceiveRequest};
use crate::backoff::Backoff;
use crate::caught::caught;
use crate::delivery::Delivery;
use crate::health::AfterFailure;
use crate::metrics::Action;
use crate::queue::QueueRuntime;

/// How a receiver backs off after a failed receive: from 100 ms up to 10 s, for as long as
/// the failures last.
const RECEIVE_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(10));

/// One receiver's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReceiverConfig {
    pub(crate) max_messages: u8,
    pub(crate) wait_time: Duration,
}

/// Receives until `stop` is cancelled or the dispatcher goes away.
///
/// Before each call it takes room for `max_messages` from `ahead`, the messages that may wait
/// received and not yet handed out (the prefetch), and from `slots`, the messages the engine
/// may hold at once (handed out and unsettled, or waiting), so it never receives more than can
/// start soon: while either is full, it waits instead of polling. The room in `ahead` of the
/// messages received is given back as the consumer hands them out.
/// A failed receive backs off with jitter and tries again, for as long as it fails.
///
/// When `stop` is cancelled during a long poll, the poll gets four round trips (as measured on
/// the queue's short calls; a second before any was measured) to answer; what it brings
/// is returned at once (visibility 0). A poll still open after that is abandoned: a message SQS
/// handed out in its answer comes back when its visibility timeout lapses.
pub(crate) async fn run(
    queue: Arc<QueueRuntime>,
    config: ReceiverConfig,
    slots: Arc<Semaphore>,
    ahead: Arc<Semaphore>,
    out: mpsc::Sender<Vec<Delivery>>,
    stop: CancellationToken,
) {
    let backoff = Backoff::new(RECEIVE_BACKOFF.0, RECEIVE_BACKOFF.1, u32::MAX);
    let mut failures: u32 = 0;
    // On a FIFO queue, the attempt id of the receive under way: kept when a call gets no
    // answer (it may have taken messages), so its retry gets them rather than hiding them.
    let mut attempt: Option<String> = None;
    loop {
        let room = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            room = Arc::clone(&ahead).acquire_many_owned(u32::from(config.max_messages)) => room,
        };
        let Ok(mut room) = room else {
            return;
        };
        let permits = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            permits = Arc::clone(&slots).acquire_many_owned(u32::from(config.max_messages)) => permits,
        };
        let Ok(mut permits) = permits else {
            return;
        };
        if queue.fifo && attempt.is_none() {
            attempt = Some(attempt_id());
        }
        // The visibility deadline and the 12-hour window are counted from before the call:
        // never later than SQS's own.
        let called_at = Instant::now();
        let result = {
            let request = ReceiveRequest {
                queue_url: &queue.url,
                max_messages: config.max_messages,
                wait_time: config.wait_time,
                visibility_timeout: queue.visibility_timeout,
                attempt_id: attempt.as_deref(),
            };
            let mut receive = std::pin::pin!(caught(async { queue.api.receive(&request).await }));
            tokio::select! {
                biased;
                result = &mut receive => result,
                () = stop.cancelled() => {
                    // A poll already under way may be handing out messages right now: give it a
                    // moment, and return what it brings at once rather than strand it.
                    match tokio::time::timeout(queue.round_trip.shutdown_grace(), &mut receive).await {
                        Ok(result) => {
                            queue.metrics.call(Action::ReceiveMessage, result.is_ok());
                            if let Ok(messages) = result {
                                return_at_once(&queue, messages, &mut permits, called_at);
                            }
                        }
                        Err(_) => queue.metrics.receive_abandoned(),
                    }
                    return;
                }
            }
        };
        // A call that got no answer may have taken messages: its retry keeps the attempt id.
        if !result.as_ref().is_err_and(|failure| failure.is_transient()) {
            attempt = None;
        }
        queue.metrics.call(Action::ReceiveMessage, result.is_ok());
        match result {
            Ok(messages) => {
                failures = 0;
                queue.health.receive_succeeded();
                if messages.is_empty() {
                    continue;
                }
                queue.metrics.received(messages.len());
                let deliveries: Vec<Delivery> = messages
                    .into_iter()
                    .map(|message| {
                        let slot = permits.split(1);
                        Delivery::new(Arc::clone(&queue), message, slot, called_at)
                    })
                    .collect();
                // The room not used goes back now; the rest as the deliveries are handed out.
                drop(permits);
                if let Some(received) = room.split(deliveries.len()) {
                    received.forget();
                }
                drop(room);
                queue.metrics.prefetched(deliveries.len() as f64);
                if let Some(age) = oldest_age(&deliveries) {
                    queue.metrics.oldest_age(age.as_secs_f64());
                }
                if let Err(unsent) = out.send(deliveries).await {
                    // Nobody takes them any more: back to the queue at once.
                    crate::delivery::return_all(&queue, unsent.0);
                    return;
                }
            }
            Err(failure) => {
                drop(permits);
                if queue.health.receive_failed(&failure) == AfterFailure::GiveUp {
                    error!(queue = %queue.name, error = %failure, "receive failed in a way retrying cannot mend for longer than the engine's give_up_after: no more receives");
                    return;
                }
                failures = failures.saturating_add(1);
                let delay = backoff.jittered(failures);
                if failure.kind == CallErrorKind::QueueNotFound {
                    error!(queue = %queue.name, error = %failure, "receive failed: the queue does not exist; retrying in {delay:?}");
                } else {
                    warn!(queue = %queue.name, error = %failure, failures, "receive failed; retrying in {delay:?}");
                }
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// A fresh `ReceiveRequestAttemptId`: 32 random hexadecimal digits (SQS takes up to 128
/// characters).
fn attempt_id() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// Returns messages received at shutdown to the queue at once (visibility 0).
fn return_at_once(
    queue: &Arc<QueueRuntime>,
    messages: Vec<crate::api::ReceivedMessage>,
    permits: &mut tokio::sync::OwnedSemaphorePermit,
    called_at: Instant,
) {
    if messages.is_empty() {
        return;
    }
    queue.metrics.received(messages.len());
    for message in messages {
        let delivery = Delivery::new(Arc::clone(queue), message, permits.split(1), called_at);
        delivery.settle_detached(crate::outcome::Outcome::Retry);
    }
}

/// The age of the oldest message among `deliveries`, from their `SentTimestamp`.
fn oldest_age(deliveries: &[Delivery]) -> Option<Duration> {
    let now = std::time::SystemTime::now();
    deliveries
        .iter()
        .filter_map(|d| d.message().sent_at())
        .filter_map(|sent| now.duration_since(sent).ok())
        .max()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::Engine;
    use crate::api::{CallError, ReceivedMessage};
    use crate::stand_in::StandIn;

    fn message(id: &str) -> ReceivedMessage {
        ReceivedMessage {
            message_id: id.to_owned(),
            receipt_handle: format!("{id}-receipt"),
            body: "body".to_owned(),
            attributes: HashMap::from([("ApproximateReceiveCount".to_owned(), "1".to_owned())]),
            message_attributes: HashMap::new(),
        }
    }

    /// A consumer of `queue` on `api` with one receiver (and a 30 s visibility timeout).
    async fn consumer(api: &Arc<StandIn>, queue: &str) -> crate::Consumer {
        Engine::builder()
            .api(Arc::clone(api))
            .queue(queue)
            .receivers(1)
            .visibility_timeout(Duration::from_secs(30))
            .build()
            .expect("engine")
            .consumer()
            .await
            .expect("consumer")
    }

    /// Drops `delivery` unsettled and shuts the consumer down.
    async fn close(mut consumer: crate::Consumer, delivery: crate::Delivery) {
        let handle = consumer.handle();
        drop(delivery);
        consumer.close().await;
        handle.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_visibility_deadline_is_counted_from_the_receive_call_not_from_its_answer() {
        let start = Instant::now();
        // SQS may hand the message out (and start its 30 s) as soon as the call arrives, and
        // the answer take 5 s to come back.
        let api = StandIn::receiving(Duration::from_secs(5), vec![message("m")]);
        let mut consumer = consumer(&api, "q").await;
        let delivery = consumer.recv().await.expect("the message");
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        // The heartbeat extends 6 s (a fifth of 30 s) before the deadline SQS may hold: 24 s
        // after the call, not 24 s after the answer.
        tokio::time::sleep_until(start + Duration::from_secs(25)).await;
        assert_eq!(
            api.calls(),
            vec![vec!["m-receipt=30"]],
            "extended before SQS's own deadline"
        );
        close(consumer, delivery).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_fifo_receive_that_got_no_answer_is_retried_with_the_same_attempt_id() {
        let mut fifo_message = message("m");
        fifo_message
            .attributes
            .insert("MessageGroupId".to_owned(), "g".to_owned());
        let api = StandIn::receiving_script(vec![
            (
                Duration::ZERO,
                Err(CallError::new(CallErrorKind::Network, "connection reset")),
            ),
            (Duration::ZERO, Ok(vec![fifo_message])),
        ]);
        let mut consumer = consumer(&api, "q.fifo").await;
        let delivery = consumer.recv().await.expect("the message, on the retry");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let ids = api.attempt_ids();
        assert_eq!(
            ids.len(),
            3,
            "failed, retried, and the next receive: {ids:?}"
        );
        assert!(ids[0].is_some());
        assert_eq!(ids[1], ids[0], "the retry keeps the attempt id");
        assert_ne!(ids[2], ids[1], "the next receive has an id of its own");
        close(consumer, delivery).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_standard_queue_sends_no_attempt_id() {
        let api = StandIn::receiving(Duration::ZERO, vec![message("m")]);
        let mut consumer = consumer(&api, "q").await;
        let delivery = consumer.recv().await.expect("the message");
        assert_eq!(api.attempt_ids().first(), Some(&None));
        close(consumer, delivery).await;
    }
}
