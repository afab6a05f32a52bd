//! The engine: configuration, and the run loop that ties receivers, workers and settlement
//! together.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::{AbortOnDropHandle, TaskTracker};
use tracing::{Instrument, debug_span, error, info, warn};

use crate::api::SqsApi;
use crate::aws::AwsSqs;
use crate::backoff::Backoff;
use crate::bounded::{
    BatchesInFlight, MaxBatchWait, MaxReceiveCount, Prefetch, ReceiveBatch, Receivers, WaitTime,
    Workers,
};
use crate::consumer::{Consumer, ConsumerConfig};
use crate::delivery::Delivery;
use crate::error::{ConfigError, Error};
use crate::fifo::FifoOrder;
use crate::handler::{BatchHandler, Handler, HandlerResult};
use crate::health::{DEFAULT_GIVE_UP_AFTER, HealthCells, HealthHandle};
use crate::limits::MAX_VISIBILITY;
use crate::metrics::{Stats, StatsCells};
use crate::outcome::{BatchOutcome, Outcome};
use crate::queue::{OpenOptions, QueueRuntime, Redrive};
use crate::receiver::ReceiverConfig;
use crate::redrive_policy::RedriveWrite;
use crate::settle::coalescer::CoalescerConfig;

/// Builds an [`Engine`]. Every setting has a default; [`build`](Self::build) checks the
/// ranges.
///
/// The defaults fit a busy queue on a real network without tuning: up to 128 long-poll
/// receivers of ten messages (as many run as keep up: one on an idle queue), 64 handlers at
/// once, up to 4,096 messages and 64 MiB of bodies held, batches that wait at most 5 ms for
/// company while a call of their kind is in flight, up to 128 of them in flight per action.
#[derive(Clone)]
pub struct EngineBuilder {
    api: Option<Arc<dyn SqsApi>>,
    queue: Option<String>,
    receivers: usize,
    workers: usize,
    prefetch: Option<usize>,
    max_held: usize,
    max_held_bytes: usize,
    receive_batch: usize,
    wait_time: Duration,
    visibility_timeout: Option<Duration>,
    max_batch_wait: Duration,
    max_batches_in_flight: usize,
    shutdown_timeout: Duration,
    backoff: Backoff,
    heartbeat: bool,
    heartbeat_margin: Option<Duration>,
    fifo_order: FifoOrder,
    on_handler_error: Outcome,
    redrive_write: RedriveWrite,
    max_attempts: Option<u32>,
    dead_letter: Option<String>,
    create_if_missing: bool,
    give_up_after: Duration,
}

impl Default for EngineBuilder {
    fn default() -> Self {
        Self {
            api: None,
            queue: None,
            receivers: DEFAULT_RECEIVERS,
            workers: 64,
            prefetch: None,
            max_held: DEFAULT_MAX_HELD,
            max_held_bytes: DEFAULT_MAX_HELD_BYTES,
            receive_batch: ReceiveBatch::MAX,
            wait_time: WaitTime::MAX,
            visibility_timeout: None,
            max_batch_wait: Duration::from_millis(5),
            max_batches_in_flight: 128,
            shutdown_timeout: Duration::from_secs(30),
            backoff: Backoff::default(),
            heartbeat: true,
            heartbeat_margin: None,
            fifo_order: FifoOrder::default(),
            on_handler_error: Outcome::Retry,
            redrive_write: RedriveWrite::default(),
            max_attempts: None,
            dead_letter: None,
            create_if_missing: false,
            give_up_after: DEFAULT_GIVE_UP_AFTER,
        }
    }
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("queue", &self.queue)
            .field("receivers", &self.receivers)
            .field("workers", &self.workers)
            .field("prefetch", &self.prefetch)
            .field("max_held", &self.max_held)
            .field("max_held_bytes", &self.max_held_bytes)
            .field("receive_batch", &self.receive_batch)
            .field("wait_time", &self.wait_time)
            .field("visibility_timeout", &self.visibility_timeout)
            .field("max_batch_wait", &self.max_batch_wait)
            .field("max_batches_in_flight", &self.max_batches_in_flight)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("backoff", &self.backoff)
            .field("heartbeat", &self.heartbeat)
            .field("heartbeat_margin", &self.heartbeat_margin)
            .field("fifo_order", &self.fifo_order)
            .field("on_handler_error", &self.on_handler_error)
            .field("redrive_write", &self.redrive_write)
            .field("max_attempts", &self.max_attempts)
            .field("dead_letter", &self.dead_letter)
            .field("create_if_missing", &self.create_if_missing)
            .field("give_up_after", &self.give_up_after)
            .finish_non_exhaustive()
    }
}

impl EngineBuilder {
    /// Talks to SQS with a client made from an `aws-config` [`SdkConfig`](aws_types::SdkConfig)
    /// (credentials, region, endpoint and `AWS_ENDPOINT_URL` as it resolved them). The SDK's
    /// own retries are turned off: the engine retries, with backoff and jitter, and counts.
    pub fn sdk_config(self, config: &aws_types::SdkConfig) -> Self {
        self.api(AwsSqs::from_sdk_config(config))
    }

    /// Talks to SQS through `client`, as it is configured.
    pub fn client(self, client: aws_sdk_sqs::Client) -> Self {
        self.api(AwsSqs::new(client))
    }

    /// Talks to SQS through any [`SqsApi`]: a wrapper that observes the calls, or a stand-in.
    pub fn api(mut self, api: impl SqsApi) -> Self {
        self.api = Some(Arc::new(api));
        self
    }

    /// The queue to consume, by name or by URL. Required.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// The most long-poll loops on the queue at once, 1..=256. Default 128.
    ///
    /// The engine runs as many as keep up with the queue: one while receives come back empty
    /// or partly filled (an idle queue costs one long poll at a time), one more each time a
    /// receive comes back full while the prefetch has room, so that a busy queue on a slow
    /// link gets as many receives in flight as its round trip needs (messages in flight =
    /// throughput × round trip: 20,000 a second at 50 ms is 1,000 messages, 100 receives).
    pub fn receivers(mut self, receivers: usize) -> Self {
        self.receivers = receivers;
        self
    }

    /// Handler invocations at once, 1..=100 000. Default 64. A message whose handler has
    /// returned no longer counts here while its settlement waits for SQS.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Messages received, or being received, ahead of a free worker (with the [`Consumer`],
    /// not yet handed out), at least one receive batch; each receiver waits for room for a
    /// whole receive batch before it calls. Default: one receive batch per receiver
    /// ([`receivers`](Self::receivers)); at most 100 000.
    pub fn prefetch(mut self, prefetch: usize) -> Self {
        self.prefetch = Some(prefetch);
        self
    }

    /// The most messages the engine holds at once: received and not yet settled, whether
    /// waiting for a worker, being handled, or waiting for SQS's answer to their settlement
    /// (then only their receipt handle is kept). At least one receive batch. Default 4,096.
    pub fn max_held(mut self, messages: usize) -> Self {
        self.max_held = messages;
        self
    }

    /// The most bytes of message bodies held at once (each body counted in whole KiB, until
    /// its message is settled), at least 1 MiB. Receivers wait for room once they have a
    /// receive's messages in hand, so the bound can be passed by what the receives in flight
    /// bring, never by more. Default 64 MiB.
    pub fn max_held_bytes(mut self, bytes: usize) -> Self {
        self.max_held_bytes = bytes;
        self
    }

    /// Messages asked for per receive call, 1..=10. Default 10: fewer costs more requests
    /// per message.
    pub fn receive_batch(mut self, messages: usize) -> Self {
        self.receive_batch = messages;
        self
    }

    /// The long-poll wait, 0..=20 s. Default 20 s, the fewest empty receives.
    pub fn wait_time(mut self, wait: Duration) -> Self {
        self.wait_time = wait;
        self
    }

    /// The visibility timeout asked for at each receive, whole seconds up to 12 hours.
    /// Default: the queue's own.
    pub fn visibility_timeout(mut self, timeout: Duration) -> Self {
        self.visibility_timeout = Some(timeout);
        self
    }

    /// How long a settlement may wait for others to share its batch call while a call of its
    /// kind is in flight, up to 1 s. An entry goes out at once when no call of its kind is in
    /// flight, and with the batch as soon as ten are waiting. Default 5 ms.
    pub fn max_batch_wait(mut self, wait: Duration) -> Self {
        self.max_batch_wait = wait;
        self
    }

    /// Batch calls of one kind in flight at once, 1..=256. Default 16.
    pub fn max_batches_in_flight(mut self, calls: usize) -> Self {
        self.max_batches_in_flight = calls;
        self
    }

    /// How long shutdown waits for running handlers before it drops them (their messages come
    /// back when their visibility lapses). Pending settlements are sent whatever this is.
    /// Default 30 s.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// How failed settlement and startup calls are retried. Default: 50 ms doubling to 5 s,
    /// 8 attempts.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Whether the heartbeat keeps unsettled messages invisible while their handlers run.
    /// Default on. It extends a message's visibility by the visibility timeout (or five
    /// margins, where that is longer: a 2 s timeout is extended by 5 s) when its deadline comes
    /// within the margin, in batch calls shared with other messages (a message falling due
    /// within a margin joins a call going out anyway), and never past 12 hours from the
    /// receive. With a visibility timeout under 2 s it stays off.
    pub fn heartbeat(mut self, on: bool) -> Self {
        self.heartbeat = on;
        self
    }

    /// How long before a message's visibility deadline the heartbeat extends it. Default: a
    /// fifth of the visibility timeout, at least 1 s and at most 60 s; never more than half
    /// the timeout. At least 1 s: a smaller margin would send extensions at the deadline
    /// itself, after SQS may already have handed the message out again. Make it larger than
    /// the worst delay of a `ChangeMessageVisibilityBatch` call, retries included.
    pub fn heartbeat_margin(mut self, margin: Duration) -> Self {
        self.heartbeat_margin = Some(margin);
        self
    }

    /// On a FIFO queue, when the next message of a group may start: once SQS confirmed the
    /// delete of the one before ([`FifoOrder::Confirmed`], the default) or as soon as its
    /// handler returned ([`FifoOrder::Outcome`]). Either way one message of a group is handled
    /// at a time, in order, while the workers take other groups. No effect on a standard queue.
    pub fn fifo_order(mut self, order: FifoOrder) -> Self {
        self.fifo_order = order;
        self
    }

    /// How a message is settled when its handler returns an `Err` (see [`HandlerResult`]).
    /// Default [`Outcome::Retry`]: the message comes back at once, its receive count one
    /// higher, and the redrive policy (if any) moves it on after its last allowed receive. The
    /// error is logged on the message's span either way.
    pub fn on_handler_error(mut self, outcome: Outcome) -> Self {
        self.on_handler_error = outcome;
        self
    }

    /// The receives after which SQS moves a message to the dead-letter queue, 1..=1000: the
    /// redrive policy's `maxReceiveCount`. Goes with [`dead_letter`](Self::dead_letter).
    ///
    /// With a redrive policy, [`Outcome::Drop`] on a delivery at this receive count returns the
    /// message (visibility 0) instead of deleting it, since the next receive is what moves it
    /// to the dead-letter queue.
    pub fn max_attempts(mut self, receives: u32) -> Self {
        self.max_attempts = Some(receives);
        self
    }

    /// Whether the engine writes its declared redrive policy onto the queue: when it differs
    /// from the queue's own (the default, [`RedriveWrite::WhenDifferent`]: nothing is written,
    /// and no `sqs:SetQueueAttributes` needed, when the queue already has it), or never
    /// ([`RedriveWrite::Never`]: the engine refuses to start when they differ, for queues whose
    /// policy belongs to Terraform or CloudFormation).
    ///
    /// Without [`max_attempts`](Self::max_attempts) and [`dead_letter`](Self::dead_letter),
    /// the engine adopts the queue's own policy: a drop at its cap returns the message so that
    /// SQS moves it to the dead-letter queue.
    pub fn redrive_write(mut self, write: RedriveWrite) -> Self {
        self.redrive_write = write;
        self
    }

    /// The dead-letter queue, by name or URL, that the redrive policy points at. Goes with
    /// [`max_attempts`](Self::max_attempts). It must exist when the engine starts, unless
    /// [`create_if_missing`](Self::create_if_missing) is set, and be FIFO when the queue is.
    ///
    /// The engine writes the policy onto the queue with `SetQueueAttributes` when it starts
    /// and the queue's own differs (see [`redrive_write`](Self::redrive_write)); that needs
    /// `sqs:SetQueueAttributes` on the queue and `sqs:GetQueueAttributes` on the dead-letter
    /// queue.
    pub fn dead_letter(mut self, queue: impl Into<String>) -> Self {
        self.dead_letter = Some(queue.into());
        self
    }

    /// Create the queue, and the dead-letter queue, when they do not exist. A name ending in
    /// `.fifo` makes a FIFO queue. Default off.
    pub fn create_if_missing(mut self, create: bool) -> Self {
        self.create_if_missing = create;
        self
    }

    /// How long receives may fail in a way retrying cannot mend (the queue was deleted, the
    /// credentials are refused) before the engine gives up: it stops receiving, lets its
    /// handlers finish, sends their settlements, and [`run`](Engine::run) returns
    /// [`Error::GaveUp`]. The engine reports itself unhealthy from the first such failure
    /// ([`Engine::health`]). Transient failures (throttling, 5xx, the network) never make it
    /// give up. Default [`DEFAULT_GIVE_UP_AFTER`] (5 minutes); at least 1 s.
    pub fn give_up_after(mut self, after: Duration) -> Self {
        self.give_up_after = after;
        self
    }

    /// Checks the settings and makes the engine. Nothing is called on SQS yet.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the first setting out of range, or the missing queue or
    /// client; [`Error::IncompleteRedrive`] when only one of
    /// [`max_attempts`](Self::max_attempts) and [`dead_letter`](Self::dead_letter) is set.
    pub fn build(self) -> Result<Engine, Error> {
        let api = self
            .api
            .ok_or_else(|| ConfigError::new("sdk_config / client / api", "unset", "set"))?;
        let queue = self
            .queue
            .filter(|q| !q.is_empty())
            .ok_or_else(|| ConfigError::new("queue", "unset", "a queue name or URL"))?;
        let receivers = Receivers::new(self.receivers)?.get();
        let workers = Workers::new(self.workers)?.get();
        let receive_batch = ReceiveBatch::new(self.receive_batch)?.get();
        let max_batches_in_flight = BatchesInFlight::new(self.max_batches_in_flight)?.get();
        let wait_time = WaitTime::new(self.wait_time)?.get();
        let visibility_timeout = match self.visibility_timeout {
            Some(timeout) if timeout > MAX_VISIBILITY || timeout.subsec_nanos() != 0 => {
                return Err(ConfigError::duration(
                    "visibility_timeout",
                    timeout,
                    "whole seconds, at most 12 hours",
                )
                .into());
            }
            Some(timeout) => Some(u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX)),
            None => None,
        };
        let max_batch_wait = MaxBatchWait::new(self.max_batch_wait)?.get();
        if let Some(margin) = self.heartbeat_margin
            && margin < MIN_HEARTBEAT_MARGIN
        {
            return Err(ConfigError::duration("heartbeat_margin", margin, "at least 1 s").into());
        }
        let prefetch = Prefetch::new(self.prefetch.unwrap_or(receive_batch * receivers))?.get();
        if self.give_up_after < Duration::from_secs(1) {
            return Err(
                ConfigError::duration("give_up_after", self.give_up_after, "at least 1 s").into(),
            );
        }
        let queue_name = crate::queue_url::name_of(&queue).to_owned();
        check_range(
            "max_held",
            self.max_held,
            receive_batch..=MAX_HELD,
            "at least one receive batch, at most 1000000",
        )?;
        check_range(
            "max_held_bytes",
            self.max_held_bytes,
            (1 << 20)..=(1 << 40),
            "1 MiB..=1 TiB",
        )?;
        let redrive = match (self.max_attempts, self.dead_letter) {
            (None, None) => None,
            (Some(_), None) => {
                return Err(Error::IncompleteRedrive {
                    queue,
                    declared: "max_attempts(..)",
                    missing: "dead_letter(..)",
                });
            }
            (None, Some(_)) => {
                return Err(Error::IncompleteRedrive {
                    queue,
                    declared: "dead_letter(..)",
                    missing: "max_attempts(..)",
                });
            }
            (Some(receives), Some(dead_letter)) => {
                let receives = MaxReceiveCount::new(receives)?.get();
                Some(Redrive {
                    max_receive_count: receives,
                    dead_letter,
                    write: self.redrive_write,
                })
            }
        };
        Ok(Engine {
            api,
            queue,
            receivers,
            workers,
            capacity: self.max_held,
            capacity_kib: self.max_held_bytes / 1024,
            prefetch,
            receive: ReceiverConfig {
                max_messages: u8::try_from(receive_batch).unwrap_or(10),
                wait_time,
            },
            visibility_timeout,
            coalescer: CoalescerConfig {
                max_batch: 10,
                max_wait: max_batch_wait,
                idle_wait: crate::settle::coalescer::IDLE_GATHER,
                max_in_flight: max_batches_in_flight,
            },
            shutdown_timeout: self.shutdown_timeout,
            backoff: self.backoff,
            heartbeat: self.heartbeat.then_some(self.heartbeat_margin),
            fifo_order: self.fifo_order,
            on_handler_error: self.on_handler_error,
            redrive,
            create_if_missing: self.create_if_missing,
            stats: Arc::new(StatsCells::default()),
            health: HealthCells::new(&queue_name, self.give_up_after),
        })
    }
}

/// The most messages held, whatever the setting.
const MAX_HELD: usize = 1_000_000;

/// The most receivers at once, unless told otherwise.
const DEFAULT_RECEIVERS: usize = 128;

/// The most messages held at once, unless told otherwise.
const DEFAULT_MAX_HELD: usize = 4_096;

/// The most bytes of bodies held at once, unless told otherwise: 64 MiB.
const DEFAULT_MAX_HELD_BYTES: usize = 64 << 20;

/// The smallest heartbeat margin: an extension must reach SQS before the deadline.
const MIN_HEARTBEAT_MARGIN: Duration = Duration::from_secs(1);

fn check_range(
    setting: &'static str,
    value: usize,
    range: std::ops::RangeInclusive<usize>,
    expected: &'static str,
) -> Result<(), ConfigError> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::new(setting, value, expected))
    }
}

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
    on_handler_error: Outcome,
    redrive: Option<Redrive>,
    create_if_missing: bool,
    stats: Arc<StatsCells>,
    health: Arc<HealthCells>,
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
    /// counted, and the engine keeps going, except when receives fail in a way retrying cannot
    /// mend (the queue was deleted, the credentials are refused) for longer than
    /// [`give_up_after`](EngineBuilder::give_up_after): then, once its handlers are done and
    /// their settlements sent, [`Error::GaveUp`].
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
    /// (and [`max_held_bytes`](EngineBuilder::max_held_bytes) of bodies), of which at most
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
        self.open_consumer(runtime, Some(order)).await
    }

    /// Opens the queue and starts its consumer; `fifo_order` as [`ConsumerConfig::fifo_order`].
    async fn open_consumer(
        self,
        runtime: &tokio::runtime::Handle,
        fifo_order: Option<FifoOrder>,
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
            },
            Arc::clone(&self.stats),
        )
        .await?;
        queue.on_handler_error = self.on_handler_error;
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
        self,
        dispatch: Dispatch<S, B>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Stats, Error> {
        let workers = self.workers;
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
            .open_consumer(&tokio::runtime::Handle::current(), fifo_order)
            .await?;
        // The dispatch loop runs as a task of the runtime, not on the caller's thread (often
        // the `block_on` of `main`): the handlers it starts and the wake-ups it gets then stay
        // on the runtime's workers instead of crossing threads for each message. Dropping this
        // future aborts it, as it stopped the loop before.
        let dispatcher = AbortOnDropHandle::new(tokio::spawn(dispatch_until_shutdown(
            consumer,
            dispatch,
            shutdown,
            workers,
            shutdown_timeout,
        )));
        match dispatcher.await {
            Ok(()) => {}
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // Cancelled only when the runtime shuts down under it.
            Err(_) => {}
        }
        match health.gave_up() {
            Some((source, failing_for)) => Err(Error::GaveUp {
                queue: health.queue().to_owned(),
                failing_for,
                source,
            }),
            None => Ok(stats.snapshot()),
        }
    }
}

/// Hands the deliveries to the handlers until `shutdown` completes, then shuts the consumer
/// down: the receivers stop, what was not started goes back, running handlers get
/// `shutdown_timeout`, and every settlement is sent.
async fn dispatch_until_shutdown<S: Handler, B: BatchHandler>(
    mut consumer: Consumer,
    dispatch: Dispatch<S, B>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    workers: usize,
    shutdown_timeout: Duration,
) {
    let control = consumer.handle();

    let stop = CancellationToken::new();
    let watcher = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                biased;
                () = shutdown => stop.cancel(),
                () = stop.cancelled() => {}
            }
        })
    };

    let tasks = TaskTracker::new();
    let workers = Arc::new(Semaphore::new(workers));
    let abort = CancellationToken::new();
    let mut returned = Vec::new();
    'receive: loop {
        match &dispatch {
            Dispatch::Single(handler) => {
                let Some(Some(delivery)) = unless_stopped(&stop, consumer.recv()).await else {
                    break 'receive;
                };
                // The pool's semaphore is never closed.
                let Some(Ok(permit)) =
                    unless_stopped(&stop, Arc::clone(&workers).acquire_owned()).await
                else {
                    returned.push(delivery);
                    break 'receive;
                };
                // The rest of the same receive batch that can start now (a free worker
                // each) starts with it, on one task: its handlers still run concurrently
                // and settle each on its own, but the batch stays on one thread and costs
                // one spawn instead of one per message.
                let mut group = Vec::with_capacity(GROUP_MAX);
                group.push((delivery, permit));
                while group.len() < GROUP_MAX {
                    let Ok(permit) = Arc::clone(&workers).try_acquire_owned() else {
                        break;
                    };
                    let Some(delivery) = consumer.try_recv_buffered() else {
                        break;
                    };
                    group.push((delivery, permit));
                }
                let abort = abort.clone();
                let handles: Vec<_> = group
                    .into_iter()
                    .map(|(delivery, permit)| handle_one(Arc::clone(handler), delivery, permit))
                    .collect();
                tasks.spawn(async move {
                    tokio::select! {
                        biased;
                        () = JoinAll::new(handles) => {}
                        () = abort.cancelled() => {}
                    }
                });
            }
            Dispatch::Batch(handler) => {
                let Some(Some(batch)) = unless_stopped(&stop, consumer.recv_batch(10)).await else {
                    break 'receive;
                };
                let Some(Ok(permit)) =
                    unless_stopped(&stop, Arc::clone(&workers).acquire_owned()).await
                else {
                    returned.extend(batch);
                    break 'receive;
                };
                let Some(queue) = batch.first().map(|d| Arc::clone(d.queue())) else {
                    continue;
                };
                let handler = Arc::clone(handler);
                let abort = abort.clone();
                let span = debug_span!("batch", queue = %queue.name, messages = batch.len());
                tasks.spawn(
                    async move {
                        let _permit = permit;
                        let (messages, tickets): (Vec<_>, Vec<_>) =
                            batch.into_iter().map(Delivery::into_parts).unzip();
                        let timer = HandlerTimer::start(&queue);
                        let outcome = tokio::select! {
                            biased;
                            outcome = handler.handle(messages) => outcome,
                            () = abort.cancelled() => return,
                        };
                        drop(timer);
                        settle_batch(&queue, tickets, outcome);
                    }
                    .instrument(span),
                );
            }
        }
    }

    // Shutdown: no more receives; what was received but not started goes back at once.
    stop.cancel();
    let _ = watcher.await;
    // Handed out but not started: they no longer count as prefetched, and go back too.
    for delivery in returned {
        delivery.settle_detached(Outcome::Retry);
    }
    consumer.close().await;
    tasks.close();
    if tokio::time::timeout(shutdown_timeout, tasks.wait())
        .await
        .is_err()
    {
        warn!(queue = control.queue(), timeout = ?shutdown_timeout, "handlers still running at the shutdown timeout; dropping them unsettled");
        abort.cancel();
        tasks.wait().await;
    }
    // Every handler is done: no delivery is left to keep invisible.
    control.shutdown().await;
    drop(consumer);
}

/// `future`'s output, or `None` once `stop` is cancelled (looked at first). `future` must be
/// cancel safe: it is dropped when `stop` wins.
async fn unless_stopped<T>(stop: &CancellationToken, future: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        value = future => Some(value),
    }
}

/// The most deliveries of one receive batch started on one task.
const GROUP_MAX: usize = 10;

/// One message through the handler and on to its settlement, holding a worker until done.
pub(crate) fn handle_one<H: Handler>(
    handler: Arc<H>,
    delivery: Delivery,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    let queue = Arc::clone(delivery.queue());
    let span = message_span(&queue.name, delivery.message());
    Box::pin(
        async move {
            let _permit = permit;
            let (message, ticket) = delivery.into_parts();
            let timer = HandlerTimer::start(&queue);
            let outcome = match handler.handle(message).await.into_outcome() {
                Ok(outcome) => outcome,
                Err(error) => {
                    let outcome = queue.on_handler_error;
                    warn!(error = %error, outcome = outcome.as_str(), "handler failed; settling by the error policy");
                    outcome
                }
            };
            drop(timer);
            // Queued now; the answer is recorded and logged by the flusher.
            ticket.settle_detached(outcome);
        }
        .instrument(span),
    )
}

/// The span a message's handler runs in, at INFO so that a subscriber's default level shows
/// it, with OpenTelemetry's messaging fields and the message's trace context: the
/// `AWSTraceHeader` system attribute (X-Ray) and a `traceparent` message attribute (W3C).
pub(crate) fn message_span(queue: &str, message: &crate::message::Message) -> tracing::Span {
    tracing::info_span!(
        "message",
        messaging.system = "aws_sqs",
        messaging.operation.type = "process",
        messaging.destination.name = queue,
        messaging.message.id = message.id(),
        messaging.sqs.receive_count = message.receive_count(),
        messaging.message.group_id = message.group_id(),
        aws.trace_header = message.attribute("AWSTraceHeader"),
        traceparent = message
            .message_attribute("traceparent")
            .and_then(crate::attribute::MessageAttribute::as_str),
    )
}

/// Runs handler futures concurrently until all are done. A future that panics is dropped
/// (its message left unsettled, as a panicking handler on a task of its own would leave it)
/// and the others go on.
pub(crate) struct JoinAll {
    futures: Vec<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>,
    left: usize,
}

impl JoinAll {
    pub(crate) fn new(futures: Vec<Pin<Box<dyn Future<Output = ()> + Send>>>) -> Self {
        let left = futures.len();
        Self {
            futures: futures.into_iter().map(Some).collect(),
            left,
        }
    }
}

impl Future for JoinAll {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        for slot in &mut this.futures {
            let Some(future) = slot else {
                continue;
            };
            let polled = std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)));
            match polled {
                Ok(Poll::Pending) => {}
                Ok(Poll::Ready(())) | Err(_) => {
                    *slot = None;
                    this.left -= 1;
                }
            }
        }
        if this.left == 0 {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Times a handler invocation and counts it as running until dropped.
struct HandlerTimer<'a> {
    queue: &'a QueueRuntime,
    started: tokio::time::Instant,
}

impl<'a> HandlerTimer<'a> {
    fn start(queue: &'a QueueRuntime) -> Self {
        queue.metrics.handler_started();
        Self {
            queue,
            started: tokio::time::Instant::now(),
        }
    }
}

impl Drop for HandlerTimer<'_> {
    fn drop(&mut self) {
        self.queue
            .metrics
            .handler_ended(self.started.elapsed().as_secs_f64());
    }
}

/// Settles the messages of a batch with the batch handler's answer.
fn settle_batch(
    queue: &QueueRuntime,
    tickets: Vec<crate::delivery::Ticket>,
    outcome: BatchOutcome,
) {
    let outcomes = match outcome {
        BatchOutcome::All(outcome) => vec![outcome; tickets.len()],
        BatchOutcome::Each(outcomes) => {
            if outcomes.len() != tickets.len() {
                error!(
                    queue = %queue.name,
                    messages = tickets.len(),
                    outcomes = outcomes.len(),
                    "batch handler returned a different number of outcomes than messages; the messages without one are left unsettled"
                );
            }
            outcomes
        }
    };
    if queue.fifo {
        check_group_order(queue, &tickets, &outcomes);
    }
    for (ticket, outcome) in tickets.into_iter().zip(outcomes) {
        ticket.settle_detached(outcome);
    }
}

/// A batch handler owns the order of a FIFO receive: warns (once per queue) when it answered a
/// message of a group with anything but a delete and a later message of the same group with a
/// delete, which hands the later one's successors out before the earlier one comes back.
fn check_group_order(
    queue: &QueueRuntime,
    tickets: &[crate::delivery::Ticket],
    outcomes: &[Outcome],
) {
    let mut stopped: Vec<&str> = Vec::new();
    for (ticket, outcome) in tickets.iter().zip(outcomes) {
        let Some(group) = ticket.group() else {
            continue;
        };
        let deletes = matches!(outcome, Outcome::Ack | Outcome::Drop);
        if !deletes {
            stopped.push(group);
        } else if stopped.contains(&&**group) {
            if !queue
                .warned_batch_order
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                warn!(
                    queue = %queue.name,
                    group = %group,
                    message_id = ticket.message_id(),
                    "a batch handler deleted a FIFO message after not deleting an earlier one of its group: the group's order is broken (answer the rest of the group like the earlier one to keep it); warned once per queue"
                );
            }
            return;
        }
    }
}

enum Dispatch<S, B> {
    Single(Arc<S>),
    Batch(Arc<B>),
}

/// Stands in for the handler kind a run does not use; never called.
struct NoHandler;

impl Handler for NoHandler {
    type Output = Outcome;

    async fn handle(&self, _message: crate::message::Message) -> Outcome {
        Outcome::Retry
    }
}

impl BatchHandler for NoHandler {
    async fn handle(&self, _messages: Vec<crate::message::Message>) -> BatchOutcome {
        BatchOutcome::All(Outcome::Retry)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::stand_in::StandIn;

    fn builder() -> EngineBuilder {
        Engine::builder()
            .api(StandIn::scripted(Vec::new()))
            .queue("q")
    }

    fn refused(builder: EngineBuilder, setting: &str) {
        match builder.build() {
            Err(Error::Config(error)) => {
                assert!(error.to_string().contains(setting), "{error}");
            }
            other => panic!("{setting}: expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn a_prefetch_past_its_bound_is_refused_rather_than_overflowing_the_slots() {
        refused(builder().prefetch(usize::MAX), "prefetch");
        refused(builder().prefetch(Prefetch::MAX + 1), "prefetch");
        refused(
            builder().workers(100_000).prefetch(usize::MAX - 50_000),
            "prefetch",
        );
        builder()
            .workers(100_000)
            .prefetch(Prefetch::MAX)
            .build()
            .expect("the largest settings fit the engine's slots");
    }

    #[test]
    fn a_heartbeat_margin_under_a_second_is_refused() {
        refused(
            builder().heartbeat_margin(Duration::ZERO),
            "heartbeat_margin",
        );
        refused(
            builder().heartbeat_margin(Duration::from_millis(999)),
            "heartbeat_margin",
        );
        builder()
            .heartbeat_margin(Duration::from_secs(1))
            .build()
            .expect("one second is enough");
        builder()
            .heartbeat_margin(Duration::MAX)
            .build()
            .expect("a margin past half the timeout is shortened to half of it");
    }

    /// A handler future that yields once (so the others run meanwhile), then counts itself
    /// done, or panics.
    fn step(done: &Arc<AtomicUsize>, panics: bool) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let done = Arc::clone(done);
        Box::pin(async move {
            tokio::task::yield_now().await;
            assert!(!panics, "this handler panics");
            done.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[tokio::test]
    async fn the_handlers_of_a_group_all_finish_though_one_of_them_panics() {
        let done = Arc::new(AtomicUsize::new(0));
        let group = vec![
            step(&done, false),
            step(&done, true),
            step(&done, false),
            step(&done, false),
        ];
        tokio::time::timeout(Duration::from_secs(5), tokio::spawn(JoinAll::new(group)))
            .await
            .expect("the group finishes")
            .expect("the group's task survives a panicking handler");
        assert_eq!(done.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_group_is_done_at_once() {
        tokio::time::timeout(Duration::from_secs(1), JoinAll::new(Vec::new()))
            .await
            .expect("an empty group is ready when first polled");
    }
}
