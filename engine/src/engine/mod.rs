//! The engine: configuration ([`builder`]), the front that opens the queue and starts the
//! consumer, and the dispatch of deliveries to the handlers ([`dispatch`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::AbortOnDropHandle;
use tracing::info;

use crate::api::SqsApi;
use crate::error::Error;
use crate::handle::error_policy::HandlerErrorPolicy;
use crate::handle::handler::{BatchHandler, Handler};
use crate::handle::processing_limit::ProcessingLimit;
use crate::health::{HealthCells, HealthHandle};
use crate::large_payload::Payloads;
use crate::metrics::{Stats, StatsCells};
use crate::receive::consumer::{Consumer, ConsumerConfig};
use crate::receive::fifo::FifoOrder;
use crate::receive::pause::PauseHandle;
use crate::receive::queue::{OpenOptions, QueueRuntime, Redrive};
use crate::receive::receiver::ReceiverConfig;
use crate::settle::Answers;
use crate::settle::coalescer::CoalescerConfig;
use crate::sqs::backoff::Backoff;
use crate::worker_pool::{PoolLane, WorkerSource};

mod builder;
mod dispatch;

#[cfg(feature = "ruststream")]
pub(crate) use builder::DEFAULT_RECEIVERS;
pub use builder::EngineBuilder;
use dispatch::{Dispatch, NoHandler, dispatch_until_shutdown};
#[cfg(feature = "bench")]
pub(crate) use dispatch::{JoinAll, handle_one};

/// A consumer of one SQS queue.
///
/// Long-poll receivers feed a bounded pool of handler invocations; each message's outcome is
/// settled on its own, in batch calls shared with other messages. Make one with
/// [`Engine::builder`], then [`run`](Self::run) it with a handler until a shutdown signal.
///
/// ```no_run
/// use std::time::Duration;
/// use sqs_engine::{Engine, Message, Outcome};
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let config = aws_config::load_from_env().await;
/// let engine = Engine::builder()
///     .sdk_config(&config)
///     .queue("orders")
///     .workers(32)
///     .build()?;
/// engine
///     .run(
///         |message: Message| async move {
///             match message.body().parse::<u64>() {
///                 Ok(_) => Outcome::Ack,
///                 Err(_) => Outcome::RetryAfter(Duration::from_secs(30)),
///             }
///         },
///         async { tokio::signal::ctrl_c().await.unwrap_or(()) },
///     )
///     .await?;
/// # Ok(())
/// # }
/// ```
pub struct Engine {
    api: Arc<dyn SqsApi>,
    queue: String,
    receivers: usize,
    workers: usize,
    /// The lane of a shared pool the workers come from, instead of the engine's own.
    pool: Option<PoolLane>,
    capacity: usize,
    capacity_kib: usize,
    prefetch: usize,
    receive: ReceiverConfig,
    visibility_timeout: Option<u32>,
    coalescer: CoalescerConfig,
    shutdown_timeout: Duration,
    backoff: Backoff,
    heartbeat: Option<Option<Duration>>,
    fifo_order: FifoOrder,
    on_handler_error: HandlerErrorPolicy,
    processing: ProcessingLimit,
    pause: PauseHandle,
    redrive: Option<Redrive>,
    create_if_missing: bool,
    stats: Arc<StatsCells>,
    health: Arc<HealthCells>,
    payloads: Payloads,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("queue", &self.queue)
            .field("receivers", &self.receivers)
            .field("workers", &self.workers)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

/// A handle on an engine's counters, readable while it runs and after.
#[derive(Debug, Clone)]
pub struct StatsHandle(Arc<StatsCells>);

impl StatsHandle {
    /// What the engine has done so far.
    pub fn snapshot(&self) -> Stats {
        self.0.snapshot()
    }
}

impl Engine {
    /// A builder with the default settings.
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// A handle on the engine's counters.
    pub fn stats(&self) -> StatsHandle {
        StatsHandle(Arc::clone(&self.stats))
    }

    /// A handle that pauses and resumes this engine's receiving while it runs (see
    /// [`PauseHandle`]). Take it before [`run`](Self::run), which consumes the engine.
    pub fn pause_handle(&self) -> PauseHandle {
        self.pause.clone()
    }

    /// A handle on the engine's health, readable while it runs and after: whether its receives
    /// succeed, whether it is draining. With the `prometheus` feature, `/healthz` and `/readyz`
    /// serve it.
    pub fn health(&self) -> HealthHandle {
        HealthHandle(Arc::clone(&self.health))
    }

    /// Consumes the queue, one message per handler call, until `shutdown` completes.
    ///
    /// Shutdown stops the receivers, returns the messages received but not started
    /// (visibility 0, so another consumer gets them at once), waits for running handlers up to
    /// the shutdown timeout, sends every pending settlement and waits for SQS's answers.
    /// Nothing a handler settled is left unsent.
    ///
    /// # Errors
    ///
    /// At startup: [`Error::QueueNotFound`], or [`Error::Open`] when resolving the queue or
    /// reading its attributes fails. Once running, failed calls are retried, logged and
    /// counted, and the engine keeps going, except when its receives, deletes or visibility
    /// changes fail in a way retrying cannot mend (the queue was deleted, the credentials or
    /// the queue's KMS key are refused), and nothing else, for longer than
    /// [`give_up_after`](EngineBuilder::give_up_after): then, once its handlers are done and
    /// their settlements sent, [`Error::GaveUp`] naming the call.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the engine abruptly: settlements already queued may be lost
    /// with the runtime, and every unsettled message comes back when its visibility lapses.
    /// Complete `shutdown` instead to stop without losing a settlement.
    pub async fn run<H: Handler>(
        self,
        handler: H,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Stats, Error> {
        self.run_with(
            Dispatch::<H, NoHandler>::Single(Arc::new(handler)),
            shutdown,
        )
        .await
    }

    /// Consumes the queue, the messages of each receive call together, until `shutdown`
    /// completes. Shutdown is as for [`run`](Self::run).
    ///
    /// # Errors
    ///
    /// As for [`run`](Self::run).
    ///
    /// # Cancel safety
    ///
    /// As for [`run`](Self::run).
    pub async fn run_batches<H: BatchHandler>(
        self,
        handler: H,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Stats, Error> {
        self.run_with(Dispatch::<NoHandler, H>::Batch(Arc::new(handler)), shutdown)
            .await
    }

    /// Opens the queue and starts its receivers, settlement and heartbeat on the current
    /// runtime, handing the deliveries to the caller instead of a handler: see [`Consumer`].
    /// The consumer holds at most [`max_held`](EngineBuilder::max_held) unsettled messages
    /// (and [`max_held_bytes`](EngineBuilder::max_held_bytes) of messages), of which at most
    /// `prefetch` (at least one receive batch) received, or being received, and not yet handed
    /// out: it receives as fast as its deliveries are taken.
    ///
    /// # Errors
    ///
    /// As for [`run`](Self::run).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn consumer(self) -> Result<Consumer, Error> {
        let runtime = tokio::runtime::Handle::current();
        self.consumer_on(&runtime).await
    }

    /// As [`consumer`](Self::consumer), with the tasks spawned on `runtime`: they keep running
    /// when the runtime that called this stops.
    ///
    /// # Errors
    ///
    /// As for [`run`](Self::run).
    pub async fn consumer_on(self, runtime: &tokio::runtime::Handle) -> Result<Consumer, Error> {
        let order = self.fifo_order;
        self.open_consumer(runtime, Some(order), Answers::Awaited)
            .await
    }

    /// Opens the queue and starts its consumer; `fifo_order` as [`ConsumerConfig::fifo_order`],
    /// `answers` as [`OpenOptions::answers`].
    async fn open_consumer(
        self,
        runtime: &tokio::runtime::Handle,
        fifo_order: Option<FifoOrder>,
        answers: Answers,
    ) -> Result<Consumer, Error> {
        let (mut queue, _attributes) = QueueRuntime::open(
            Arc::clone(&self.api),
            OpenOptions {
                queue: self.queue.clone(),
                visibility_timeout: self.visibility_timeout,
                backoff: self.backoff,
                coalescer: self.coalescer,
                heartbeat: self.heartbeat,
                redrive: self.redrive.clone(),
                create_if_missing: self.create_if_missing,
                health: Arc::clone(&self.health),
                answers,
            },
            Arc::clone(&self.stats),
        )
        .await
        .inspect_err(|_| self.health.failed_to_open())?;
        queue.on_handler_error = self.on_handler_error;
        queue.processing = self.processing;
        queue.paused = self.pause.watch();
        queue.payloads = self.payloads.clone();
        let queue = Arc::new(queue);
        info!(queue = %queue.name, url = %queue.url, visibility_timeout = queue.visibility_timeout, "queue opened");
        queue.metrics.workers(self.workers);
        queue.health.running();
        Ok(Consumer::start(
            queue,
            Arc::clone(&self.stats),
            ConsumerConfig {
                receivers: self.receivers,
                capacity: self.capacity,
                capacity_kib: self.capacity_kib,
                ahead: self.prefetch,
                receive: self.receive,
                fifo_order,
            },
            runtime,
        ))
    }

    async fn run_with<S: Handler, B: BatchHandler>(
        mut self,
        dispatch: Dispatch<S, B>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Stats, Error> {
        let source = match self.pool.take() {
            Some(lane) => WorkerSource::Shared(lane),
            None => WorkerSource::own(self.workers),
        };
        let shutdown_timeout = self.shutdown_timeout;
        let stats = Arc::clone(&self.stats);
        let health = Arc::clone(&self.health);
        // A batch handler gets whole receives and owns their order; single handlers get one
        // message of a FIFO group at a time.
        let fifo_order = match &dispatch {
            Dispatch::Single(_) => Some(self.fifo_order),
            Dispatch::Batch(_) => None,
        };
        let consumer = self
            // The handlers' settlements are the engine's to send: none waits for an answer.
            .open_consumer(
                &tokio::runtime::Handle::current(),
                fifo_order,
                Answers::Detached,
            )
            .await?;
        // The dispatch loop runs as a task of the runtime, not on the caller's thread (often
        // the `block_on` of `main`): the handlers it starts and the wake-ups it gets then stay
        // on the runtime's workers instead of crossing threads for each message. Dropping this
        // future aborts it, as it stopped the loop before.
        let dispatcher = AbortOnDropHandle::new(tokio::spawn(dispatch_until_shutdown(
            consumer,
            dispatch,
            shutdown,
            source,
            shutdown_timeout,
        )));
        match dispatcher.await {
            Ok(()) => {}
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // Cancelled only when the runtime shuts down under it.
            Err(_) => {}
        }
        match health.gave_up() {
            Some(gave_up) => Err(Error::GaveUp {
                queue: health.queue().to_owned(),
                action: gave_up.call.action(),
                failing_for: gave_up.lasted,
                source: gave_up.error,
            }),
            None => Ok(stats.snapshot()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::stand_in::{StandIn, full_receives};
    use crate::{Engine, Message, Outcome};

    #[tokio::test(start_paused = true)]
    async fn handlers_in_step_share_full_delete_calls() {
        // 640 messages, 64 workers of 50 ms each: their acks come in bursts 50 ms apart, and
        // each burst leaves a partial batch that only the next burst fills.
        let api = StandIn::receiving_script_settling_in(
            full_receives(0, 64, Duration::from_millis(5)),
            Duration::from_millis(5),
        );
        let stats = Engine::builder()
            .api(Arc::clone(&api))
            .queue("q")
            .workers(64)
            .visibility_timeout(Duration::from_secs(30))
            .build()
            .expect("engine")
            .run(
                |_message: Message| async {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Outcome::Ack
                },
                tokio::time::sleep(Duration::from_secs(3)),
            )
            .await
            .expect("runs");
        assert_eq!(stats.messages_received, 640);
        let calls = api.calls();
        let entries: usize = calls.iter().map(Vec::len).sum();
        assert_eq!(entries, 640, "every message deleted once");
        let partial = calls.iter().filter(|call| call.len() < 10).count();
        assert!(
            partial <= 1,
            "{partial} of {} delete calls went out partly filled",
            calls.len()
        );
    }
}
