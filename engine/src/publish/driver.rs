//! The per-destination drivers of a publisher: each destination (a queue, or a topic with
//! feature `sns`) a line of the batching core under a byte budget per call, whose batches go
//! out in `SendMessageBatch` (or `PublishBatch`) calls, each publish answered with its own
//! entry's result.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, OnceCell, oneshot};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug_span, warn};

use super::error::PublishError;
use super::services::Services;
use super::target::{SMALL_BATCH_BYTES, Target};
use crate::api::{CallError, CallErrorKind, EntryResult, SendEntry};
use crate::limits::MAX_BATCH_ENTRIES;
use crate::metrics::CallCounts;
use crate::queue_url::is_url;
use crate::sqs::backoff::Backoff;
use crate::sqs::batch::budget::{ByteBudget, Weighed};
use crate::sqs::batch::drive::{BatchCall, Driven, Due, EntryAnswer, drive, send_per_entry};
use crate::sqs::batch::{BatchConfig, Batcher, Queued};
use crate::sqs::retry::retrying;

/// A publish waiting for its call.
struct Pending {
    entry: SendEntry,
    /// The entry's size.
    bytes: usize,
    /// When it was queued.
    since: Instant,
    /// Who waits for the answer.
    waiter: Waiter,
}

/// Who waits for a publish's answer: the destination as the publish named it, for errors, and
/// the answer's channel.
type Waiter = (Arc<str>, oneshot::Sender<Answer>);

/// A publish's answer.
pub(crate) type Answer = Result<(), PublishError>;

impl Queued for Pending {
    fn enqueued_at(&self) -> Instant {
        self.since
    }
}

impl Weighed for Pending {
    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// A destination's waiting publishes.
type Line = Batcher<Pending, ByteBudget>;

/// One destination: its address (queue URL, topic ARN) once resolved, and its waiting
/// publishes.
struct Destination {
    target: Target,
    address: OnceCell<String>,
    state: Mutex<Line>,
    wake: Notify,
    calls: CallCounts,
}

impl Destination {
    fn lock(&self) -> MutexGuard<'_, Line> {
        // Plain data under the lock, and no code under it panics.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entries of a call of several refused as longer than this SQS takes: the calls
    /// carry at most [`SMALL_BATCH_BYTES`] from now on, and the entries go first, in their
    /// order (draining or not), so a FIFO queue keeps its order. An entry larger than that
    /// goes alone, and is answered with the refusal if that call is refused too.
    fn again_in_small_batches(&self, again: Vec<Pending>) {
        let mut state = self.lock();
        if state.rule_mut().max_bytes() > SMALL_BATCH_BYTES {
            warn!(destination = %self.target.name(), "a batch call over 256 KiB was refused as too long: calls of at most 256 KiB from now on");
            state.rule_mut().lower(SMALL_BATCH_BYTES);
        }
        state.push_front(again);
    }
}

/// The destinations of one publisher, and their drivers.
pub(crate) struct Publishing {
    services: Services,
    runtime: tokio::runtime::Handle,
    backoff: Backoff,
    config: BatchConfig,
    destinations: Mutex<Destinations>,
    tasks: TaskTracker,
}

/// The destinations published to so far, and whether publishing was closed.
#[derive(Default)]
struct Destinations {
    by_target: HashMap<Target, Arc<Destination>>,
    closed: bool,
}

impl Publishing {
    pub(crate) fn new(services: Services, runtime: tokio::runtime::Handle) -> Self {
        Self {
            services,
            runtime,
            backoff: Backoff::default(),
            config: BatchConfig {
                max_batch: MAX_BATCH_ENTRIES,
                max_wait: Duration::from_millis(5),
                max_in_flight: 4,
            },
            destinations: Mutex::new(Destinations::default()),
            tasks: TaskTracker::new(),
        }
    }

    /// The services the calls go to.
    #[cfg(feature = "sns")]
    pub(crate) fn services(&self) -> &Services {
        &self.services
    }

    /// The retry budget of the calls.
    #[cfg(feature = "sns")]
    pub(crate) fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// Queues `entry` for `target`; the receiver answers once SQS (or SNS) has. `named` is the
    /// destination as the publish named it, for its errors.
    ///
    /// # Errors
    ///
    /// [`PublishError::Closed`] once [`drain`](Self::drain) was called.
    pub(crate) fn enqueue(
        &self,
        named: &str,
        target: Target,
        entry: SendEntry,
        bytes: usize,
    ) -> Result<oneshot::Receiver<Answer>, PublishError> {
        let destination = {
            let mut destinations = self
                .destinations
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if destinations.closed {
                return Err(PublishError::Closed);
            }
            match destinations.by_target.get(&target) {
                Some(destination) => Arc::clone(destination),
                None => {
                    let fifo = target.is_fifo();
                    let destination = Arc::new(Destination {
                        calls: CallCounts::new(target.name(), target.action()),
                        target: target.clone(),
                        address: OnceCell::new(),
                        state: Mutex::new(Batcher::new(
                            BatchConfig {
                                // One call at a time keeps a FIFO destination's order.
                                max_in_flight: if fifo { 1 } else { self.config.max_in_flight },
                                ..self.config
                            },
                            ByteBudget::new(target.max_batch_bytes()),
                        )),
                        wake: Notify::new(),
                    });
                    destinations
                        .by_target
                        .insert(target.clone(), Arc::clone(&destination));
                    let span = debug_span!("publisher", destination = %target.name(), action = target.action());
                    self.tasks.spawn_on(
                        run(
                            self.services.clone(),
                            self.backoff,
                            Arc::clone(&destination),
                            self.tasks.clone(),
                        )
                        .instrument(span),
                        &self.runtime,
                    );
                    destination
                }
            }
        };
        let (tx, rx) = oneshot::channel();
        let pending = Pending {
            entry,
            bytes,
            since: Instant::now(),
            waiter: (Arc::from(named), tx),
        };
        match destination.lock().offer(pending) {
            Ok(true) => destination.wake.notify_one(),
            Ok(false) => {}
            Err(_) => return Err(PublishError::Closed),
        }
        Ok(rx)
    }

    /// Sends everything waiting, and waits for every answer. Publishes after this are refused.
    pub(crate) async fn drain(&self) {
        let destinations: Vec<Arc<Destination>> = {
            let mut destinations = self
                .destinations
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            destinations.closed = true;
            destinations.by_target.values().cloned().collect()
        };
        for destination in destinations {
            destination.lock().drain();
            destination.wake.notify_one();
        }
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// Sends the batches of one destination until it is drained.
async fn run(
    services: Services,
    backoff: Backoff,
    destination: Arc<Destination>,
    tasks: TaskTracker,
) {
    drive(&DestinationDriver {
        services,
        backoff,
        destination,
        tasks,
    })
    .await;
}

/// One destination's batcher and its calls, as the batch driver runs them.
struct DestinationDriver {
    services: Services,
    backoff: Backoff,
    destination: Arc<Destination>,
    tasks: TaskTracker,
}

impl Driven for DestinationDriver {
    type Batch = Vec<Pending>;

    fn poll(&self, now: Instant) -> Due<Self::Batch> {
        let mut state = self.destination.lock();
        let mut batches = Vec::new();
        while let Some((_, batch)) = state.poll(now) {
            batches.push(batch);
        }
        Due {
            batches,
            next: state.next_deadline(),
            done: state.is_done(),
        }
    }

    fn send(&self, batch: Self::Batch) {
        self.tasks.spawn(send(
            self.services.clone(),
            self.backoff,
            Arc::clone(&self.destination),
            batch,
        ));
    }

    fn wake(&self) -> &Notify {
        &self.destination.wake
    }
}

/// The address of a target: a queue's URL, a topic's ARN.
async fn resolve(
    services: &Services,
    backoff: Backoff,
    target: &Target,
) -> Result<String, CallError> {
    match target {
        Target::Queue(queue) if is_url(queue) => Ok(queue.clone()),
        Target::Queue(queue) => retrying(&backoff, || services.sqs.queue_url(queue)).await,
        #[cfg(feature = "sns")]
        Target::Topic(topic) => super::topic::topic_arn(services, backoff, topic).await,
    }
}

/// Sends one batch, and again for its entries that failed transiently, then answers each.
async fn send(
    services: Services,
    backoff: Backoff,
    destination: Arc<Destination>,
    batch: Vec<Pending>,
) {
    let address = destination
        .address
        .get_or_try_init(|| resolve(&services, backoff, &destination.target))
        .await
        .cloned();
    match address {
        Ok(address) => {
            let call = PublishCall {
                services: &services,
                destination: &destination,
                address: &address,
                calls: &destination.calls,
                entries: batch.len(),
                bytes: batch.iter().map(|pending| pending.bytes).sum(),
                again: Mutex::new(Vec::new()),
            };
            let (entries, waiters) = batch
                .into_iter()
                .map(|pending| (pending.entry, pending.waiter))
                .unzip();
            send_per_entry(&call, &backoff, entries, waiters).await;
            let again = call
                .again
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner);
            if !again.is_empty() {
                destination.again_in_small_batches(again);
            }
        }
        Err(error) => {
            warn!(destination = %destination.target.name(), error = %error, "publish: the destination cannot be resolved");
            for pending in batch {
                let (named, tx) = pending.waiter;
                let _ = tx.send(Err(publish_error(&named, &error)));
            }
        }
    }
    destination.lock().finish();
    destination.wake.notify_one();
}

/// The batch calls of one destination, once its address is known.
struct PublishCall<'a> {
    services: &'a Services,
    destination: &'a Destination,
    address: &'a str,
    calls: &'a CallCounts,
    /// The batch's entries and their bytes.
    entries: usize,
    bytes: usize,
    /// The entries to send again in smaller calls, in their order, after this one.
    again: Mutex<Vec<Pending>>,
}

impl BatchCall for PublishCall<'_> {
    type Entry = SendEntry;
    type Waiter = Waiter;

    fn call<'a>(
        &'a self,
        entries: &'a [SendEntry],
        _sent_at: Instant,
    ) -> impl Future<Output = Result<Vec<EntryResult>, CallError>> + Send + 'a {
        match &self.destination.target {
            Target::Queue(_) => self.services.sqs.send_message_batch(self.address, entries),
            #[cfg(feature = "sns")]
            Target::Topic(_) => match self.services.sns() {
                Ok(sns) => sns.publish_batch(self.address, entries),
                Err(error) => Box::pin(std::future::ready(Err(error))),
            },
        }
    }

    fn called(&self, ok: bool, entries: usize, _sent_at: Instant) {
        self.calls.call(ok, entries);
    }

    fn answer(&self, entry: SendEntry, waiter: Waiter, answer: EntryAnswer, _sent_at: Instant) {
        let (named, tx) = match &answer {
            // A batch over what this SQS takes goes again, in smaller calls.
            EntryAnswer::CallFailed { error, .. }
                if too_long(error) && self.entries > 1 && self.bytes > SMALL_BATCH_BYTES =>
            {
                self.again
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Pending {
                        bytes: entry.size(),
                        entry,
                        since: Instant::now(),
                        waiter,
                    });
                return;
            }
            _ => waiter,
        };
        let result = match answer {
            EntryAnswer::Applied => Ok(()),
            EntryAnswer::Refused(failure) | EntryAnswer::GaveUp { failure, .. } => {
                let kind = if failure.is_transient() {
                    CallErrorKind::Server
                } else {
                    CallErrorKind::Invalid
                };
                let error = CallError::new(kind, failure.message.clone().unwrap_or_default())
                    .with_code(failure.code);
                Err(publish_error(&named, &error))
            }
            EntryAnswer::CallFailed { error, .. } => Err(publish_error(&named, &error)),
        };
        // The publish may have been dropped: only its answer is lost.
        let _ = tx.send(result);
    }

    fn call_failed(&self, error: &CallError, attempt: u32, again: bool, _entries: usize) {
        let (address, action) = (self.address, self.calls.action);
        if again {
            warn!(address, attempt, error = %error, action, "batch publish failed; retrying");
        } else {
            warn!(address, attempt, error = %error, action, "batch publish failed");
        }
    }
}

/// Whether `error` is SQS refusing a batch call as longer than it takes.
fn too_long(error: &CallError) -> bool {
    error
        .code
        .as_deref()
        .is_some_and(|code| code.ends_with("BatchRequestTooLong"))
}

fn publish_error(named: &str, error: &CallError) -> PublishError {
    PublishError::Failed {
        destination: named.to_owned(),
        source: error.clone(),
    }
}
