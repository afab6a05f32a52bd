//! Topic fan-out (feature `sns`): [`SnsPublish`] (the policy) and [`SnsPublisher`] (the live
//! publisher).
//!
//! A topic publish is built exactly as a queue publish is (headers as message attributes, a
//! binary body base64 with its marker, a FIFO group and deduplication id), so a queue subscribed
//! to the topic with raw delivery hands its consumer what a direct publish would. Publishes to
//! one topic share `PublishBatch` calls of up to ten entries, through the same coalescer and
//! drivers as `SendMessageBatch`; each publish still resolves with its own entry's answer.

use std::sync::Arc;

use ::ruststream::{OutgoingFor, PairError, PublishPolicy, Publisher, Take};
use tokio::sync::oneshot;

use super::connection::{ConnectedSqsBroker, Core};
use super::error::SqsError;
use super::publish::{OutgoingEntry, SqsPublishOptions, answered, paired_core};
use super::queue::is_fifo;
use super::topic::topic_name;
use crate::publish::{Answer, Target};
use crate::sqs::sns_api::{MAX_PUBLISH_ENTRIES, MAX_TOPIC_MESSAGE_BYTES};

// The coalescer shared with queues makes batches `PublishBatch` takes.
const _: () = assert!(crate::limits::MAX_BATCH_ENTRIES <= MAX_PUBLISH_ENTRIES);

/// The publish policy of a position whose messages go to an SNS topic, which delivers them to
/// every queue subscribed to it. The destination a message names is the topic's name (or ARN);
/// the same name under [`SqsPublish`](super::SqsPublish) would be a queue.
///
/// ```
/// use sqs_engine::prelude::*;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, Serialize, Outgoing)]
/// #[outgoing(name = "orders")]
/// struct PlaceOrder {
///     id: u64,
/// }
///
/// #[derive(Deserialize, Serialize, Outgoing)]
/// #[outgoing(name = "order-events")]
/// struct OrderPlaced {
///     id: u64,
/// }
///
/// #[subscriber(SqsQueue::new("orders"), reply)]
/// async fn accept(order: &PlaceOrder) -> OrderPlaced {
///     OrderPlaced { id: order.id }
/// }
///
/// fn app() -> impl App {
///     RustStream::new(AppInfo::new("orders", "0.1.0")).with_broker(SqsBroker::new(), |b| {
///         // The reply goes to the topic `order-events`, not to a queue of that name.
///         b.include(accept).out_reply(SnsPublish::default());
///     })
/// }
/// # fn main() { let _ = app(); }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct SnsPublish {
    group_id: Option<String>,
    /// The queues named by `fans_out_to` (feature `testing`).
    fan_out: Vec<String>,
}

impl SnsPublish {
    /// The message group of publishes to FIFO topics that name none themselves (after the
    /// call's own group and the message's partition key), as
    /// [`SqsPublish::group_id`](super::SqsPublish::group_id) is for queues. A standard topic
    /// refuses a publish of a position that sets it, with [`SqsError::NotFifo`].
    pub fn group_id(mut self, group: impl Into<String>) -> Self {
        self.group_id = Some(group.into());
        self
    }

    /// Names queues subscribed to this position's topics outside the service (by an operator,
    /// another service), so the test harness knows where a publish goes. Feature `testing`
    /// only: production code has no such step.
    ///
    /// In process, each queue is subscribed to the topic before the first publish reaches it,
    /// as the operator's subscription would be; on a live stack the harness waits for each
    /// queue's subscription to handle the copy it receives. The queues apply to every topic
    /// the position publishes to.
    #[cfg(feature = "testing")]
    pub fn fans_out_to(mut self, queues: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.fan_out.extend(queues.into_iter().map(Into::into));
        self
    }
}

impl PublishPolicy<ConnectedSqsBroker> for SnsPublish {
    type Live = SnsPublisher;

    fn pair(
        self,
        connected: &ConnectedSqsBroker,
    ) -> impl Future<Output = Result<SnsPublisher, PairError>> + Send {
        std::future::ready(paired_core(connected).map(|core| SnsPublisher {
            core,
            group_id: self.group_id,
            fan_out: self.fan_out,
        }))
    }

    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self, channel: &str) -> ::ruststream::asyncapi::Bindings {
        super::bindings::topic_channel_bindings(channel)
    }
}

/// Publishes to SNS topics, by the name (or ARN) each message carries. Made by
/// [`SnsPublish`] at a mount site, or by
/// [`ConnectedSqsBroker::sns_publisher`].
///
/// A topic name resolves to its ARN with `CreateTopic` (which finds an existing topic), once
/// per topic; a `.fifo` name is a FIFO topic. Publishes to one topic are coalesced into
/// `PublishBatch` calls: ten at a time, or a few milliseconds' worth while a call is in flight
/// (one call at a time on a FIFO topic, which keeps the order). A FIFO topic takes the same
/// [`SqsPublishOptions`] as a FIFO queue.
#[derive(Clone)]
pub struct SnsPublisher {
    core: Arc<Core>,
    group_id: Option<String>,
    fan_out: Vec<String>,
}

impl std::fmt::Debug for SnsPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnsPublisher")
            .field("group_id", &self.group_id)
            .finish_non_exhaustive()
    }
}

impl ConnectedSqsBroker {
    /// A publisher to any topic, by the name each message carries.
    pub fn sns_publisher(&self) -> SnsPublisher {
        SnsPublisher {
            core: Arc::clone(self.core()),
            group_id: None,
            fan_out: Vec::new(),
        }
    }
}

impl SnsPublisher {
    /// Builds the entry and queues it for the topic's next `PublishBatch`.
    fn enqueue(
        &self,
        destination: &str,
        payload: Vec<u8>,
        headers: &::ruststream::HeaderMap,
        options: Option<&SqsPublishOptions>,
    ) -> Result<oneshot::Receiver<Answer>, SqsError> {
        if self.core.is_closed() {
            return Err(SqsError::NotConnected);
        }
        let topic = topic_name(destination).into_owned();
        self.declare_fan_out(destination, &topic)?;
        let message = OutgoingEntry {
            destination,
            payload,
            headers,
            options,
        };
        let (entry, bytes) = message.build(
            &self.core,
            is_fifo(&topic),
            self.group_id.as_deref(),
            MAX_TOPIC_MESSAGE_BYTES,
        )?;
        self.core
            .publisher()
            .publishing()
            .enqueue(destination, Target::Topic(topic), entry, bytes)
            .map_err(SqsError::from)
    }

    /// Makes the queues the policy named subscribers of `topic`: for the harness's routing,
    /// and in process as the operator's subscription.
    fn declare_fan_out(&self, destination: &str, topic: &str) -> Result<(), SqsError> {
        for queue in &self.fan_out {
            if let Some(harness) = &self.core.harness {
                harness
                    .subscribe_to_topic(topic, &super::queue::queue_name(queue))
                    .map_err(|error| SqsError::Refused {
                        destination: destination.to_owned(),
                        reason: format!("the topic cannot deliver to `{queue}`: {error}"),
                    })?;
            }
            self.core.note_topic_queue(topic, queue);
        }
        Ok(())
    }
}

impl Publisher for SnsPublisher {
    type Payload = Take;
    type Error = SqsError;
    type Options = SqsPublishOptions;

    /// Queues the message for its topic's next `PublishBatch` and resolves when SNS has
    /// answered for it.
    ///
    /// # Errors
    ///
    /// [`SqsError::Refused`] or [`SqsError::NotFifo`] for a message SNS would refuse or alter,
    /// before anything is sent; [`SqsError::Publish`] when SNS refused the entry, the topic
    /// cannot be resolved, or SNS could not be reached within the retry budget;
    /// [`SqsError::NotConnected`] after the broker shut down.
    ///
    /// # Cancel safety
    ///
    /// The message is queued when this is called, before the future is first polled; dropping
    /// the future does not withdraw it, only its answer is lost.
    fn publish(
        &self,
        msg: OutgoingFor<'_, Take>,
        options: Option<&SqsPublishOptions>,
    ) -> impl Future<Output = Result<(), SqsError>> + Send {
        let (name, payload, headers) = msg.into_parts();
        let queued = self.enqueue(name, Vec::from(payload), &headers, options);
        async move { answered(queued?).await }
    }
}
