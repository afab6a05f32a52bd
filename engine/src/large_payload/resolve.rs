//! Receiving: each pointer's body fetched from S3 before the handler sees the message.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_s3::error::DisplayErrorContext;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::config::LargePayloads;
use super::pointer::{self, S3Location};
use crate::delivery::Delivery;
use crate::outcome::Outcome;
use crate::queue::QueueRuntime;

impl LargePayloads {
    /// See [`Payloads::resolve`](super::Payloads::resolve). The fetches of one receive run
    /// together. On a FIFO queue, a message whose body cannot be read holds back the later
    /// messages of its group in the same receive: they go back until it comes back.
    pub(crate) async fn resolve(
        &self,
        queue: &Arc<QueueRuntime>,
        deliveries: Vec<Delivery>,
    ) -> Vec<Delivery> {
        if !deliveries
            .iter()
            .any(|delivery| pointer::is_marked(delivery.message().message_attributes()))
        {
            return deliveries;
        }
        let fetched =
            futures::future::join_all(deliveries.into_iter().map(|d| self.resolve_one(d))).await;
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
    async fn resolve_one(&self, mut delivery: Delivery) -> Result<Delivery, (Delivery, String)> {
        if !pointer::is_marked(delivery.message().message_attributes()) {
            return Ok(delivery);
        }
        let location = match pointer::parse(delivery.message().body()) {
            Ok(location) => location,
            Err(reason) => return Err((delivery, reason)),
        };
        match self.fetch(&location).await {
            Ok(body) => {
                delivery
                    .message_mut()
                    .replace_stored_body(body, pointer::unmark);
                if self.delete_after_ack {
                    let client = self.client.clone();
                    delivery.after_delete(Box::new(move || delete_object(client, location)));
                }
                Ok(delivery)
            }
            Err(reason) => Err((delivery, reason)),
        }
    }

    /// The body stored at `location`, as text.
    async fn fetch(&self, location: &S3Location) -> Result<String, String> {
        let object = self
            .client
            .get_object()
            .bucket(&location.bucket)
            .key(&location.key)
            .send()
            .await
            .map_err(|error| {
                format!(
                    "GetObject {location} failed: {}",
                    DisplayErrorContext(error)
                )
            })?;
        let bytes = object
            .body
            .collect()
            .await
            .map_err(|error| format!("reading {location} failed: {error}"))?
            .into_bytes();
        String::from_utf8(bytes.to_vec())
            .map_err(|_| format!("{location} is not UTF-8 text, as a message body must be"))
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

/// Deletes the object of a message SQS deleted, on the side: a failure leaves the object (a
/// bucket's lifecycle rule may expire it) and is logged.
fn delete_object(client: aws_sdk_s3::Client, location: S3Location) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        warn!(object = %location, "no runtime to delete the message's object on; it stays in S3");
        return;
    };
    runtime.spawn(async move {
        if let Err(error) = client
            .delete_object()
            .bucket(&location.bucket)
            .key(&location.key)
            .send()
            .await
        {
            warn!(object = %location, error = %DisplayErrorContext(error), "deleting the object of a deleted message failed; it stays in S3");
        }
    });
}
