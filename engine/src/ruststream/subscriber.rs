//! [`SqsSubscriber`]: the deliveries of one subscription, one by one or in batches.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ::ruststream::{BatchSubscriber, Subscriber};
use futures::Stream;
use tracing::warn;

use super::connection::{Core, Watched};
use super::error::SqsError;
use super::message::SqsMessage;
use crate::limits::MAX_BATCH_ENTRIES;
use crate::receive::consumer::Consumer;

/// The deliveries of one queue, from the engine's receivers.
///
/// The receivers run on the broker's runtime from the moment the subscription opens. Dropping
/// the subscriber stops them and returns the messages received but not handed out
/// (visibility 0).
pub struct SqsSubscriber {
    consumer: Consumer,
    core: Arc<Core>,
    batch_window: Duration,
    warned_clamp: AtomicBool,
    /// In process, the queue is watched by the test harness while the subscription lives
    /// and the broker is connected (see [`Core::watch`]). Declared after `consumer`, so it
    /// ends after the consumer returned what it held.
    watch: Option<Arc<Watched>>,
}

impl std::fmt::Debug for SqsSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsSubscriber")
            .field("consumer", &self.consumer)
            .finish_non_exhaustive()
    }
}

impl SqsSubscriber {
    pub(crate) fn new(consumer: Consumer, core: Arc<Core>, batch_window: Duration) -> Self {
        Self {
            consumer,
            core,
            batch_window,
            warned_clamp: AtomicBool::new(false),
            watch: None,
        }
    }

    /// The subscription's watch, in process.
    pub(crate) fn watching(mut self, watch: Option<Arc<Watched>>) -> Self {
        self.watch = watch;
        self
    }

    /// The queue's name.
    pub fn queue(&self) -> String {
        self.consumer.handle().queue().to_owned()
    }

    /// The queue's URL, as SQS answered `GetQueueUrl` when the subscription opened (or as
    /// given).
    pub fn queue_url(&self) -> &str {
        self.consumer.queue_url()
    }

    async fn next_batch(&mut self, size: usize) -> Option<Vec<SqsMessage>> {
        let mut batch = self.consumer.recv_batch(size).await?;
        if batch.len() < size {
            // Messages sent together may come back over two receives: give the batch a short
            // window to fill.
            let deadline = tokio::time::Instant::now() + self.batch_window;
            while batch.len() < size {
                match tokio::time::timeout_at(
                    deadline,
                    self.consumer.recv_batch(size - batch.len()),
                )
                .await
                {
                    Ok(Some(more)) => batch.extend(more),
                    Ok(None) | Err(_) => break,
                }
            }
        }
        let core = &self.core;
        Some(
            batch
                .into_iter()
                .map(|delivery| SqsMessage::new(delivery, core))
                .collect(),
        )
    }
}

impl Subscriber for SqsSubscriber {
    type Message = SqsMessage;
    type Error = SqsError;

    /// The deliveries in the order the receiver got them. Cancel safe between polls: a
    /// delivery is handed out or kept for the next poll. The stream ends only when the broker
    /// shuts down; receive errors are retried, with backoff, by the engine.
    fn stream(&mut self) -> impl Stream<Item = Result<SqsMessage, SqsError>> + Send + '_ {
        futures::stream::unfold(self, |this| async move {
            let delivery = this.consumer.recv().await?;
            let message = SqsMessage::new(delivery, &this.core);
            Some((Ok(message), this))
        })
    }
}

impl BatchSubscriber for SqsSubscriber {
    type Batch = Vec<SqsMessage>;

    /// Batches of at most `size` deliveries, never empty, in receive order. SQS hands out at
    /// most ten messages a receive: a larger size is used as ten, with a warning.
    fn batches(
        &mut self,
        size: NonZeroUsize,
    ) -> impl Stream<Item = Result<Vec<SqsMessage>, SqsError>> + Send + '_ {
        let mut size = size.get();
        if size > MAX_BATCH_ENTRIES {
            if !self.warned_clamp.swap(true, Ordering::Relaxed) {
                warn!(
                    queue = self.consumer.handle().queue(),
                    size, "SQS receives at most 10 messages at once: batches hold at most 10"
                );
            }
            size = MAX_BATCH_ENTRIES;
        }
        futures::stream::unfold(self, move |this| async move {
            let batch = this.next_batch(size).await?;
            Some((Ok(batch), this))
        })
    }
}
