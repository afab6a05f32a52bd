//! The bodies of one receive that are stored in S3, fetched before the deliveries are handed
//! out (see [`LargePayloads`](crate::LargePayloads)).

use std::sync::Arc;

use crate::receive::delivery::Delivery;
use crate::receive::queue::QueueRuntime;

/// The deliveries of one receive, with each body stored in S3 in place of its pointer, when
/// the queue fetches them. One whose body cannot be read is settled by the queue's
/// handler-error policy, with a warning that says why, and is not among those returned; on a
/// FIFO queue, the later messages of its group in the same receive go back until it comes
/// back. The fetches of one receive run together, while the heartbeat keeps the messages
/// invisible.
///
/// # Cancel safety
///
/// Not cancel safe: the deliveries are dropped with the future (unsettled, they come back when
/// their visibility lapses).
pub(super) async fn resolve(queue: &Arc<QueueRuntime>, deliveries: Vec<Delivery>) -> Vec<Delivery> {
    #[cfg(feature = "s3")]
    if let Some(s3) = &queue.payloads.s3 {
        return fetching::resolve(queue, s3, deliveries).await;
    }
    let _ = queue;
    deliveries
}

#[cfg(feature = "s3")]
mod fetching {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::time::Instant;
    use tracing::{debug, warn};

    use crate::LargePayloads;
    use crate::handle::outcome::Outcome;
    use crate::large_payload::pointer;
    use crate::receive::delivery::Delivery;
    use crate::receive::queue::QueueRuntime;

    pub(super) async fn resolve(
        queue: &Arc<QueueRuntime>,
        s3: &LargePayloads,
        deliveries: Vec<Delivery>,
    ) -> Vec<Delivery> {
        if !deliveries
            .iter()
            .any(|delivery| pointer::is_marked(delivery.message().message_attributes()))
        {
            return deliveries;
        }
        let fetched =
            futures::future::join_all(deliveries.into_iter().map(|d| resolve_one(s3, d))).await;
        // The FIFO groups held back: the earliest unreadable message's sequence number and
        // when it comes back.
        let mut held_back: HashMap<String, (Option<u128>, Instant)> = HashMap::new();
        let mut ready = Vec::with_capacity(fetched.len());
        for result in fetched {
            match result {
                Ok(delivery) => ready.push(delivery),
                Err((delivery, reason)) => {
                    let message = delivery.message();
                    let outcome = queue.on_handler_error.outcome(message.receive_count());
                    warn!(
                        queue = %queue.name,
                        message_id = message.id(),
                        error = %reason,
                        outcome = outcome.as_str(),
                        "the message's body stored in S3 cannot be read; settling by the handler-error policy"
                    );
                    if queue.fifo
                        && let Some(group) = message.group_id()
                        && let Some(back_at) = back_at(outcome)
                    {
                        let sequence = message.sequence_number();
                        let entry = held_back
                            .entry(group.to_owned())
                            .or_insert((sequence, back_at));
                        *entry = (entry.0.min(sequence), entry.1.max(back_at));
                    }
                    delivery.settle_detached(outcome);
                }
            }
        }
        if held_back.is_empty() {
            return ready;
        }
        let (kept, returned): (Vec<_>, Vec<_>) = ready.into_iter().partition(|delivery| {
            let message = delivery.message();
            message
                .group_id()
                .and_then(|group| held_back.get(group))
                .is_none_or(|(first, _)| message.sequence_number() < *first)
        });
        for delivery in returned {
            let group = delivery.message().group_id().unwrap_or_default();
            let back_at = held_back
                .get(group)
                .map_or_else(Instant::now, |held| held.1);
            debug!(queue = %queue.name, group, "returning a message behind its group's unreadable one, to keep the order");
            delivery.return_for_order(back_at);
        }
        kept
    }

    /// `delivery` with its stored body in place of the pointer, or why it cannot have it.
    async fn resolve_one(
        s3: &LargePayloads,
        mut delivery: Delivery,
    ) -> Result<Delivery, (Delivery, String)> {
        if !pointer::is_marked(delivery.message().message_attributes()) {
            return Ok(delivery);
        }
        let location = match pointer::parse(delivery.message().body()) {
            Ok(location) => location,
            Err(reason) => return Err((delivery, reason)),
        };
        match s3.fetch(&location).await {
            Ok(body) => {
                delivery
                    .message_mut()
                    .replace_stored_body(body, pointer::unmark);
                if let Some(deleter) = s3.deleter(location) {
                    delivery.after_delete(Box::new(deleter));
                }
                Ok(delivery)
            }
            Err(reason) => Err((delivery, reason)),
        }
    }

    /// When a message settled with `outcome` is visible again, if it stays in the queue.
    fn back_at(outcome: Outcome) -> Option<Instant> {
        match outcome {
            Outcome::Ack | Outcome::Drop => None,
            Outcome::Retry => Some(Instant::now()),
            Outcome::RetryAfter(delay) => Some(Instant::now() + delay.max(Duration::from_secs(1))),
        }
    }
}
