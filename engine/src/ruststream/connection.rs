//! What a connected broker is: the [`Core`] its publishers, subscriptions and deliveries share,
//! and [`ConnectedSqsBroker`], which holds it. What it does (subscribe, publish, shut down) is
//! in the modules that do it.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::harness::{Harness, Held};
use crate::api::SqsApi;
use crate::publish::{Publisher, Services};
use crate::receive::consumer::ConsumerHandle;

/// The connection a broker and its clones share.
pub(crate) type SharedConnection = Arc<Mutex<Option<ConnectedSqsBroker>>>;

/// What the connected broker, its publishers and its deliveries share.
pub(crate) struct Core {
    pub(super) api: Arc<dyn SqsApi>,
    /// The queues subscribed to each topic (by topic name) that this connection knows of:
    /// subscribed through it, or declared by a policy's `fans_out_to`.
    #[cfg(feature = "sns")]
    topic_queues: Mutex<HashMap<String, Vec<String>>>,
    /// Held while a queue's access policy is read and written back, so that two grants made
    /// through one connection do not drop each other's statement.
    #[cfg(feature = "sns")]
    pub(crate) policy_writes: tokio::sync::Mutex<()>,
    pub(super) runtime: tokio::runtime::Handle,
    pub(super) closed: AtomicBool,
    /// Whether a settlement resolves with SQS's answer (see
    /// [`SqsBroker::confirm_settlements`](super::SqsBroker::confirm_settlements)).
    pub(super) confirm_settlements: bool,
    /// The redrive policies declared on bare queue names, until they are subscribed.
    pub(super) redrives: Mutex<HashMap<String, (NonZeroU32, String)>>,
    pub(super) consumers: Mutex<Vec<ConsumerHandle>>,
    /// The publisher whose batches the broker's publishers queue their entries in.
    pub(super) publisher: Publisher,
    /// Where bodies too large for SQS go, when the broker was given a bucket's client.
    #[cfg(feature = "s3")]
    pub(crate) large_payloads: Option<Arc<crate::LargePayloads>>,
    /// The test harness, when the framework's test mode connected the broker in process.
    pub(crate) harness: Option<Arc<dyn Harness>>,
    /// In process, the subscriptions' watches, ended by the shutdown (see [`Core::watch`]).
    watches: Mutex<Vec<Weak<Watched>>>,
}

/// A subscription's watch on its queue, in process: taken out by the shutdown, or dropped with
/// the subscriber.
pub(crate) type Watched = Mutex<Option<Held>>;

impl Core {
    /// The redrive policy declared on the bare queue name `name`, if any.
    pub(super) fn redrive_of(&self, name: &str) -> Option<(NonZeroU32, String)> {
        self.redrives
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    pub(crate) fn new(services: Services, runtime: tokio::runtime::Handle) -> Self {
        let api = Arc::clone(&services.sqs);
        Self {
            publisher: Publisher::with_services(services, runtime.clone()),
            api,
            #[cfg(feature = "sns")]
            topic_queues: Mutex::new(HashMap::new()),
            #[cfg(feature = "sns")]
            policy_writes: tokio::sync::Mutex::new(()),
            runtime,
            closed: AtomicBool::new(false),
            confirm_settlements: false,
            redrives: Mutex::new(HashMap::new()),
            consumers: Mutex::new(Vec::new()),
            #[cfg(feature = "s3")]
            large_payloads: None,
            harness: None,
            watches: Mutex::new(Vec::new()),
        }
    }

    /// In process, watches `queue` for a subscription: until the subscriber is dropped or the
    /// broker shut down, whichever comes first. A subscription whose receivers the shutdown
    /// stopped no longer receives, as on SQS: the queue's next subscription (on a new
    /// connection) gets its messages, a delivery requeued after the shutdown included. Returns
    /// the SQS the subscription receives through, and its watch.
    pub(super) fn watch(&self, queue: &str) -> Option<(Arc<dyn SqsApi>, Arc<Watched>)> {
        let (reader, watch) = self.harness.as_ref()?.watch(queue);
        let watch = Arc::new(Mutex::new(Some(watch)));
        self.watches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&watch));
        Some((reader, watch))
    }

    /// In process, ends the watches of the subscriptions still held.
    pub(super) fn end_watches(&self) {
        let watches =
            std::mem::take(&mut *self.watches.lock().unwrap_or_else(PoisonError::into_inner));
        for watch in watches.iter().filter_map(Weak::upgrade) {
            drop(watch.lock().unwrap_or_else(PoisonError::into_inner).take());
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether a settlement resolves with SQS's answer rather than once it is queued: when asked for, and in process, where the test harness counts a delivery
    /// until SQS answered its settlement.
    pub(crate) fn confirms_settlements(&self) -> bool {
        self.harness.is_some() || self.confirm_settlements
    }

    /// What each subscription's consumer has done so far.
    #[cfg(test)]
    pub(crate) fn consumer_stats(&self) -> Vec<crate::Stats> {
        self.consumers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(ConsumerHandle::stats)
            .collect()
    }

    pub(crate) fn publisher(&self) -> &Publisher {
        &self.publisher
    }

    /// Notes that `queue` is subscribed to `topic` (both as the service named them), for the
    /// test harness's routing.
    #[cfg(feature = "sns")]
    pub(crate) fn note_topic_queue(&self, topic: &str, queue: &str) {
        let mut topics = self
            .topic_queues
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let queues = topics.entry(topic.to_owned()).or_default();
        if !queues.iter().any(|known| known == queue) {
            queues.push(queue.to_owned());
        }
    }

    /// The queues known to be subscribed to `topic`, or `None` for a name no topic of this
    /// connection has.
    #[cfg(all(feature = "sns", feature = "testing"))]
    pub(crate) fn topic_queues(&self, topic: &str) -> Option<Vec<String>> {
        self.topic_queues
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(topic)
            .cloned()
    }

    /// A deduplication id no other publish of this process uses.
    pub(crate) fn next_deduplication_id(&self) -> String {
        self.publisher.next_deduplication_id()
    }
}

/// A connected [`SqsBroker`](super::SqsBroker): opens subscriptions and pairs publishers.
///
/// Clones share one connection: shutting one down shuts them all.
#[derive(Clone)]
pub struct ConnectedSqsBroker {
    pub(crate) core: Arc<Core>,
    pub(crate) create_if_missing: bool,
}

impl std::fmt::Debug for ConnectedSqsBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectedSqsBroker")
            .field("closed", &self.core.is_closed())
            .finish_non_exhaustive()
    }
}

impl ConnectedSqsBroker {
    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }
}
