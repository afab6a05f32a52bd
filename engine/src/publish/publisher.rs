//! [`Publisher`]: sends messages to SQS queues in `SendMessageBatch` calls, each message
//! answered with its own result; and [`PublisherBuilder`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::driver::Publishing;
use super::error::PublishError;
use super::message::OutgoingMessage;
use super::services::Services;
use super::target::Target;
#[cfg(feature = "s3")]
use crate::api::SendEntry;
use crate::api::SqsApi;
use crate::error::ConfigError;
use crate::limits::MAX_MESSAGE_BYTES;
use crate::queue_url::is_fifo;
use crate::sqs::aws::AwsSqs;

/// Sends messages to SQS queues, by name or URL.
///
/// Messages to one queue are coalesced into `SendMessageBatch` calls of up to ten: a batch goes
/// out when ten are waiting, when the oldest has waited 5 ms, or at once when no call is in
/// flight for the queue (one at a time on a FIFO queue, which keeps the order of the sends).
/// Each [`send`](Self::send) resolves with its own entry's result: an entry SQS refused fails
/// its own send only, and an entry that failed transiently is sent again with backoff. With
/// feature `s3` and [`large_payloads`](PublisherBuilder::large_payloads), a body over the
/// threshold goes to S3 first and travels as a pointer that AWS's extended client libraries
/// read.
///
/// Clones share the same batches. [`close`](Self::close) sends what is waiting and refuses
/// what comes after.
///
/// ```no_run
/// use sqs_engine::{OutgoingMessage, Publisher};
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let config = aws_config::load_from_env().await;
/// let publisher = Publisher::builder().sdk_config(&config).build()?;
/// publisher
///     .send("orders", OutgoingMessage::new(r#"{"order":7}"#))
///     .await?;
/// publisher
///     .send(
///         "payments.fifo",
///         OutgoingMessage::new(r#"{"payment":3}"#).group_id("account-42"),
///     )
///     .await?;
/// publisher.close().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Publisher {
    inner: Arc<Inner>,
}

/// What a publisher's clones share.
struct Inner {
    publishing: Publishing,
    dedup_prefix: String,
    dedup_seq: AtomicU64,
    #[cfg(feature = "s3")]
    large_payloads: Option<Arc<crate::LargePayloads>>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher").finish_non_exhaustive()
    }
}

impl Publisher {
    /// A builder with the default settings.
    pub fn builder() -> PublisherBuilder {
        PublisherBuilder::default()
    }

    /// A publisher over `services`, whose drivers run on `runtime`.
    #[cfg(feature = "ruststream")]
    pub(crate) fn with_services(services: Services, runtime: tokio::runtime::Handle) -> Self {
        Self::made(
            services,
            runtime,
            #[cfg(feature = "s3")]
            None,
        )
    }

    fn made(
        services: Services,
        runtime: tokio::runtime::Handle,
        #[cfg(feature = "s3")] large_payloads: Option<Arc<crate::LargePayloads>>,
    ) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        Self {
            inner: Arc::new(Inner {
                publishing: Publishing::new(services, runtime),
                dedup_prefix: format!("se-{:x}-{nanos:x}", std::process::id()),
                dedup_seq: AtomicU64::new(0),
                #[cfg(feature = "s3")]
                large_payloads,
            }),
        }
    }

    /// Sends `message` to `queue` (a name or URL) in the queue's next `SendMessageBatch`, and
    /// resolves when SQS has answered for it.
    ///
    /// # Errors
    ///
    /// [`PublishError::Refused`] or [`PublishError::NotFifo`] for a message SQS would refuse or
    /// alter (an empty body, more than ten attributes, more than 1 MiB unless it goes to S3, a
    /// FIFO message without a group), before anything is sent; [`PublishError::Failed`] when
    /// SQS refused the entry or could not be reached within the retry budget;
    /// [`PublishError::NotStored`] when its body was to go to S3 and could not be stored;
    /// [`PublishError::Closed`] after [`close`](Self::close).
    ///
    /// # Cancel safety
    ///
    /// A message is queued when the future is first polled (once its body is stored, when it
    /// goes to S3); dropping the future after that does not withdraw it, only its answer is
    /// lost. Dropped before, nothing is sent (an object already stored stays).
    pub async fn send(&self, queue: &str, message: OutgoingMessage) -> Result<(), PublishError> {
        #[cfg(feature = "s3")]
        let max_bytes = if self.inner.large_payloads.is_some() {
            // Any size builds: a message over the threshold is stored, and its pointer is small.
            usize::MAX
        } else {
            MAX_MESSAGE_BYTES
        };
        #[cfg(not(feature = "s3"))]
        let max_bytes = MAX_MESSAGE_BYTES;
        let (entry, bytes) = message.into_entry(
            queue,
            is_fifo(queue),
            || self.next_deduplication_id(),
            max_bytes,
        )?;
        #[cfg(feature = "s3")]
        let (entry, bytes) = self.stored(queue, entry, bytes).await?;
        let answer =
            self.inner
                .publishing
                .enqueue(queue, Target::Queue(queue.to_owned()), entry, bytes)?;
        answer.await.unwrap_or(Err(PublishError::Closed))
    }

    /// `entry` with its body in S3, when it goes there.
    #[cfg(feature = "s3")]
    async fn stored(
        &self,
        queue: &str,
        mut entry: SendEntry,
        bytes: usize,
    ) -> Result<(SendEntry, usize), PublishError> {
        match &self.inner.large_payloads {
            Some(payloads) if payloads.stores(bytes) => {
                payloads
                    .store(&mut entry)
                    .await
                    .map_err(|reason| PublishError::NotStored {
                        destination: queue.to_owned(),
                        reason,
                    })?;
                let bytes = entry.size();
                Ok((entry, bytes))
            }
            _ => Ok((entry, bytes)),
        }
    }

    /// Sends everything waiting and waits for every answer; every send after this is refused
    /// with [`PublishError::Closed`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the batches go out whether or not this is awaited to the end, and a later
    /// call waits for them again.
    pub async fn close(&self) {
        self.inner.publishing.drain().await;
    }

    /// A deduplication id no other publish of this process uses.
    pub(crate) fn next_deduplication_id(&self) -> String {
        let seq = self.inner.dedup_seq.fetch_add(1, Ordering::Relaxed);
        format!("{}-{seq:x}", self.inner.dedup_prefix)
    }

    /// The destinations' drivers, which the broker's publishers queue their entries in.
    #[cfg(feature = "ruststream")]
    pub(crate) fn publishing(&self) -> &Publishing {
        &self.inner.publishing
    }
}

/// Builds a [`Publisher`].
#[derive(Clone, Default)]
#[must_use]
pub struct PublisherBuilder {
    api: Option<Arc<dyn SqsApi>>,
    #[cfg(feature = "s3")]
    large_payloads: Option<crate::LargePayloads>,
}

impl std::fmt::Debug for PublisherBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublisherBuilder")
            .field("api", &self.api.is_some())
            .finish_non_exhaustive()
    }
}

impl PublisherBuilder {
    /// Sends through a client made from `config`, as
    /// [`EngineBuilder::sdk_config`](crate::EngineBuilder::sdk_config) makes one.
    pub fn sdk_config(self, config: &aws_types::SdkConfig) -> Self {
        self.api(AwsSqs::from_sdk_config(config))
    }

    /// Sends through `api`: an [`AwsSqs`] over a client of your own, a wrapper that observes
    /// the calls, or a stand-in.
    pub fn api(mut self, api: impl SqsApi) -> Self {
        self.api = Some(Arc::new(api));
        self
    }

    /// Stores a body over `payloads`' threshold in its bucket and sends a pointer in its place
    /// (feature `s3`; see [`LargePayloads`](crate::LargePayloads)).
    #[cfg(feature = "s3")]
    pub fn large_payloads(mut self, payloads: crate::LargePayloads) -> Self {
        self.large_payloads = Some(payloads);
        self
    }

    /// Makes the publisher, whose batches are sent by tasks of the current tokio runtime.
    /// Nothing is called on SQS yet.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when no client was given, or outside a tokio runtime.
    pub fn build(self) -> Result<Publisher, ConfigError> {
        let api = self
            .api
            .ok_or_else(|| ConfigError::new("sdk_config / client / api", "unset", "set"))?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ConfigError::new("build", "called outside a tokio runtime", "inside one")
        })?;
        Ok(Publisher::made(
            Services::sqs(api),
            runtime,
            #[cfg(feature = "s3")]
            self.large_payloads.map(Arc::new),
        ))
    }
}
