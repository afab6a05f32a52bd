//! [`EngineBuilder`]: the engine's settings, their defaults, and the checks that make an
//! [`Engine`].

use std::sync::Arc;
use std::time::Duration;

use super::Engine;
use crate::api::SqsApi;
use crate::bounded::{
    BatchesInFlight, GiveUpAfter, HeartbeatMargin, MaxBatchWait, MaxHeld, MaxHeldBytes,
    MaxReceiveCount, Prefetch, ReceiveBatch, Receivers, WaitTime, Workers,
};
use crate::error::{ConfigError, Error};
use crate::handle::error_policy::HandlerErrorPolicy;
use crate::handle::processing_limit::ProcessingLimit;
use crate::handle::system_attributes::SystemAttributes;
use crate::health::{DEFAULT_GIVE_UP_AFTER, HealthCells};
use crate::large_payload::Payloads;
use crate::limits::MAX_VISIBILITY;
use crate::metrics::StatsCells;
use crate::receive::fifo::FifoOrder;
use crate::receive::queue::Redrive;
use crate::receive::receive_rate::MaxReceiveRate;
use crate::receive::receiver::ReceiverConfig;
use crate::settle::coalescer::CoalescerConfig;
use crate::sqs::aws::AwsSqs;
use crate::sqs::backoff::Backoff;
use crate::sqs::redrive_policy::RedriveWrite;
use crate::worker_pool::{Share, WorkerPool};

/// Builds an [`Engine`]. Every setting has a default; [`build`](Self::build) checks the
/// ranges.
///
/// The defaults fit a busy queue on a real network without tuning: up to 128 long-poll
/// receivers of ten messages (as many run as keep up: one on an idle queue), 64 handlers at
/// once, up to 4,096 messages and 64 MiB of messages held, batches that wait at most 5 ms for
/// company while a call of their kind is in flight, up to 128 of them in flight per action.
#[derive(Clone)]
pub struct EngineBuilder {
    api: Option<Arc<dyn SqsApi>>,
    queue: Option<String>,
    receivers: usize,
    workers: Option<usize>,
    pool: Option<(WorkerPool, Share)>,
    prefetch: Option<usize>,
    max_held: usize,
    max_held_bytes: usize,
    receive_batch: usize,
    wait_time: Duration,
    visibility_timeout: Option<Duration>,
    system_attributes: SystemAttributes,
    max_receive_rate: Option<f64>,
    max_batch_wait: Duration,
    max_batches_in_flight: usize,
    shutdown_timeout: Duration,
    backoff: Backoff,
    heartbeat: bool,
    heartbeat_margin: Option<Duration>,
    fifo_order: FifoOrder,
    on_handler_error: HandlerErrorPolicy,
    max_processing_time: Option<Duration>,
    on_processing_timeout: Option<HandlerErrorPolicy>,
    max_extension: Option<Duration>,
    redrive_write: RedriveWrite,
    max_attempts: Option<u32>,
    dead_letter: Option<String>,
    create_if_missing: bool,
    give_up_after: Duration,
    payloads: Payloads,
}

impl Default for EngineBuilder {
    fn default() -> Self {
        Self {
            api: None,
            queue: None,
            receivers: DEFAULT_RECEIVERS,
            workers: None,
            pool: None,
            prefetch: None,
            max_held: DEFAULT_MAX_HELD,
            max_held_bytes: DEFAULT_MAX_HELD_BYTES,
            receive_batch: ReceiveBatch::MAX,
            wait_time: WaitTime::MAX,
            visibility_timeout: None,
            system_attributes: SystemAttributes::default(),
            max_receive_rate: None,
            max_batch_wait: Duration::from_millis(5),
            max_batches_in_flight: 128,
            shutdown_timeout: Duration::from_secs(30),
            backoff: Backoff::default(),
            heartbeat: true,
            heartbeat_margin: None,
            fifo_order: FifoOrder::default(),
            on_handler_error: HandlerErrorPolicy::default(),
            max_processing_time: None,
            on_processing_timeout: None,
            max_extension: None,
            redrive_write: RedriveWrite::default(),
            max_attempts: None,
            dead_letter: None,
            create_if_missing: false,
            give_up_after: DEFAULT_GIVE_UP_AFTER,
            payloads: Payloads::default(),
        }
    }
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("queue", &self.queue)
            .field("receivers", &self.receivers)
            .field("workers", &self.workers)
            .field("pool", &self.pool)
            .field("prefetch", &self.prefetch)
            .field("max_held", &self.max_held)
            .field("max_held_bytes", &self.max_held_bytes)
            .field("receive_batch", &self.receive_batch)
            .field("wait_time", &self.wait_time)
            .field("visibility_timeout", &self.visibility_timeout)
            .field("system_attributes", &self.system_attributes)
            .field("max_receive_rate", &self.max_receive_rate)
            .field("max_batch_wait", &self.max_batch_wait)
            .field("max_batches_in_flight", &self.max_batches_in_flight)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("backoff", &self.backoff)
            .field("heartbeat", &self.heartbeat)
            .field("heartbeat_margin", &self.heartbeat_margin)
            .field("fifo_order", &self.fifo_order)
            .field("on_handler_error", &self.on_handler_error)
            .field("max_processing_time", &self.max_processing_time)
            .field("on_processing_timeout", &self.on_processing_timeout)
            .field("max_extension", &self.max_extension)
            .field("redrive_write", &self.redrive_write)
            .field("max_attempts", &self.max_attempts)
            .field("dead_letter", &self.dead_letter)
            .field("payloads", &self.payloads)
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
    /// receive comes back full while the workers are short of messages, so that a busy queue
    /// on a slow link gets as many receives in flight as its round trip needs (messages in
    /// flight = throughput × round trip: 20,000 a second at 50 ms is 1,000 messages, 100
    /// receives), and one fewer when received messages pile up ahead of the workers.
    pub fn receivers(mut self, receivers: usize) -> Self {
        self.receivers = receivers;
        self
    }

    /// Handler invocations at once, 1..=100 000. Default 64. A message whose handler has
    /// returned no longer counts here while its settlement waits for SQS.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers);
        self
    }

    /// Takes the workers from `pool`, shared with other engines, as `share` says, instead of
    /// the engine's own [`workers`](Self::workers) (setting both is refused by
    /// [`build`](Self::build)). See [`WorkerPool`].
    pub fn worker_pool(mut self, pool: &WorkerPool, share: Share) -> Self {
        self.pool = Some((pool.clone(), share));
        self
    }

    /// Messages received, or being received, ahead of a free worker (with the
    /// [`Consumer`](crate::Consumer), not yet handed out), at least one receive batch; each
    /// receiver waits for room for a whole receive batch before it calls. Default: one receive
    /// batch per receiver ([`receivers`](Self::receivers)); at most 100 000.
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

    /// The most bytes of messages held at once, at least 1 MiB: each message's body and
    /// message attributes (names, data types and values, as SQS counts a message's size),
    /// counted in whole KiB until it is settled. Receivers wait for room once they have a
    /// receive's messages in hand, so the bound can be passed by what the receives in flight
    /// bring, never by more; the heartbeat keeps those messages invisible while they wait.
    /// Default 64 MiB.
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

    /// The most messages a second the receivers take from the queue, for a queue whose
    /// handlers call something that allows only so many calls a second (a partner's API, a
    /// database): receiving never runs ahead of it by more than one receive batch, so no
    /// message waits in the prefetch for the rate to allow it, its visibility timeout running.
    /// The receivers share one token bucket of one receive batch: each receive waits for a
    /// whole batch's worth, and what its answer did not use (an empty long poll costs none) is
    /// given back. At rates under one batch a second, each receive still asks for a full
    /// batch, a few seconds apart, rather than one message a call.
    ///
    /// Default: none. 0.01..=1,000,000 messages a second; [`build`](Self::build) refuses
    /// other values (and NaN) with a [`ConfigError`].
    pub fn max_receive_rate(mut self, per_second: f64) -> Self {
        self.max_receive_rate = Some(per_second);
        self
    }

    /// The visibility timeout asked for at each receive, whole seconds up to 12 hours.
    /// Default: the queue's own.
    pub fn visibility_timeout(mut self, timeout: Duration) -> Self {
        self.visibility_timeout = Some(timeout);
        self
    }

    /// Which system attributes each message carries. Default
    /// [`SystemAttributes::Used`]: those the engine reads; [`SystemAttributes::All`] for every
    /// one SQS has.
    pub fn system_attributes(mut self, attributes: SystemAttributes) -> Self {
        self.system_attributes = attributes;
        self
    }

    /// How long a settlement may wait for others to share its batch call while a call of its
    /// kind is in flight, up to 1 s. An entry goes out at once when no call of its kind is in
    /// flight, unless it is a delete on a standard queue and the messages still out would fill
    /// its batch: such a delete waits for them, call in flight or not, up to twenty times this
    /// long (at most 100 ms, and never less than twice this) under [`Engine::run`] and
    /// [`Engine::run_batches`], where no handler waits for the answer, and up to twice this
    /// long for a [`Consumer`](crate::Consumer)'s deliveries, whose answers may be awaited.
    /// Every entry goes with the batch as soon as ten are waiting. Default 5 ms.
    pub fn max_batch_wait(mut self, wait: Duration) -> Self {
        self.max_batch_wait = wait;
        self
    }

    /// Batch calls of one kind in flight at once, 1..=256. Default 128.
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
    ///
    /// Off (with a visibility timeout above zero), the receivers keep no more messages waiting
    /// for a worker than the workers start in half a visibility timeout, once a handler has
    /// ended, and a message whose visibility lapsed before a worker took it is let go
    /// unhandled ([`Stats::lapsed`](crate::Stats::lapsed)).
    pub fn heartbeat(mut self, on: bool) -> Self {
        self.heartbeat = on;
        self
    }

    /// How long before a message's visibility deadline the heartbeat extends it. Default: a
    /// fifth of the visibility timeout, at least 1 s and at most 60 s; never more than half
    /// the timeout. At least 1 s: a smaller margin would send extensions at the deadline
    /// itself, after SQS may already have handed the message out again. An extension that
    /// fails is tried again until the deadline (unless SQS refused its receipt handle), so the margin is
    /// how long a brownout of `ChangeMessageVisibilityBatch` may last without a running message
    /// being handed out again: make it longer than the outages to ride out.
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

    /// How a message is settled when its handler returns an `Err` (see
    /// [`HandlerResult`](crate::HandlerResult)): an [`Outcome`](crate::Outcome) for every
    /// failure, or an [`ErrorBackoff`](crate::ErrorBackoff) (see [`HandlerErrorPolicy`]).
    ///
    /// Default: [`ErrorBackoff::default`](crate::ErrorBackoff::default), the message comes
    /// back after 1 s, doubling with each receive up to 15 minutes (less up to a quarter at
    /// random), its receive count one higher each time, and the redrive policy (if any) moves
    /// it on after its last allowed receive. A handler that keeps failing then costs a few
    /// receives a minute at first and one per 15 minutes at most, not a loop at full speed.
    /// [`Outcome::Retry`](crate::Outcome::Retry) was the default before: the message comes
    /// back at once. The error is logged on the message's span either way.
    ///
    /// A backoff's first delay must be at least 1 s and at most its longest, and its longest
    /// at most 12 hours: [`build`](Self::build) refuses other values with a [`ConfigError`]
    /// naming `on_handler_error`.
    pub fn on_handler_error(mut self, policy: impl Into<HandlerErrorPolicy>) -> Self {
        self.on_handler_error = policy.into();
        self
    }

    /// Bodies stored in S3 by AWS's extended client libraries (or by the broker's
    /// publishers) are fetched before the handler sees their message, and deleted from S3 once
    /// the message is: see [`LargePayloads`](crate::LargePayloads). Without it, a pointer
    /// reaches the handler as received.
    #[cfg(feature = "s3")]
    pub fn large_payloads(mut self, payloads: crate::LargePayloads) -> Self {
        self.payloads.s3 = Some(Arc::new(payloads));
        self
    }

    /// How long a handler may run: past it, the handler is cancelled (its future dropped) and
    /// its message settled by [`on_processing_timeout`](Self::on_processing_timeout), with a
    /// warning on the message's span. A batch handler's deadline covers its whole batch. Not
    /// applied to a [`Consumer`](crate::Consumer)'s deliveries, whose caller runs them.
    ///
    /// Default: none. 1 s..=12 h, and no longer than [`max_extension`](Self::max_extension)
    /// when that is set; [`build`](Self::build) refuses other values with a [`ConfigError`].
    pub fn max_processing_time(mut self, limit: Duration) -> Self {
        self.max_processing_time = Some(limit);
        self
    }

    /// How a message is settled when its handler was cancelled at
    /// [`max_processing_time`](Self::max_processing_time): an [`Outcome`](crate::Outcome) or
    /// an [`ErrorBackoff`](crate::ErrorBackoff), as for
    /// [`on_handler_error`](Self::on_handler_error). Default: the `on_handler_error` policy, so
    /// a message whose handler always hangs backs off like one whose handler always fails.
    pub fn on_processing_timeout(mut self, policy: impl Into<HandlerErrorPolicy>) -> Self {
        self.on_processing_timeout = Some(policy.into());
        self
    }

    /// How long after its receive the heartbeat may keep a message invisible: its last
    /// extension ends there, and the message becomes visible again then, its handler done or
    /// not. Without it, a handler that never ends holds its message for SQS's 12 hours.
    ///
    /// Default: none (12 hours). 1 s..=12 h; [`build`](Self::build) refuses other values with
    /// a [`ConfigError`].
    pub fn max_extension(mut self, cap: Duration) -> Self {
        self.max_extension = Some(cap);
        self
    }

    /// The receives after which SQS moves a message to the dead-letter queue, 1..=1000: the
    /// redrive policy's `maxReceiveCount`. Goes with [`dead_letter`](Self::dead_letter).
    ///
    /// With a redrive policy, [`Outcome::Drop`](crate::Outcome::Drop) on a delivery at this
    /// receive count returns the message (visibility 0) instead of deleting it, since the next
    /// receive is what moves it to the dead-letter queue.
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

    /// How long receives, deletes or visibility changes may fail in a way retrying cannot mend
    /// (the queue was deleted, the credentials or the queue's KMS key are refused), with no
    /// success of that call between (transient failures between do not count), before the
    /// engine gives up: it stops receiving, lets its
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
        let (workers, pool) = match (self.workers, self.pool) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(
                    "workers",
                    "set together with worker_pool",
                    "one of workers and worker_pool",
                )
                .into());
            }
            (workers, None) => (
                Workers::new(workers.unwrap_or(DEFAULT_WORKERS))?.get(),
                None,
            ),
            (None, Some((pool, share))) => (pool.workers(), Some(pool.lane(share)?)),
        };
        let batch = ReceiveBatch::new(self.receive_batch)?;
        let receive_batch = batch.get();
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
        let max_rate = self.max_receive_rate.map(MaxReceiveRate::new).transpose()?;
        let max_batch_wait = MaxBatchWait::new(self.max_batch_wait)?.get();
        let heartbeat_margin = self
            .heartbeat_margin
            .map(|margin| HeartbeatMargin::new(margin).map(HeartbeatMargin::get))
            .transpose()?;
        let prefetch = Prefetch::new(self.prefetch.unwrap_or(receive_batch * receivers))?.get();
        let give_up_after = GiveUpAfter::new(self.give_up_after)?.get();
        let on_handler_error = self.on_handler_error.validated()?;
        let processing = ProcessingLimit::new(
            self.max_processing_time,
            self.on_processing_timeout.unwrap_or(on_handler_error),
            self.max_extension,
        )?;
        let queue_name = crate::queue_url::name_of(&queue).to_owned();
        let max_held = MaxHeld::new(self.max_held, batch)?.get();
        let max_held_bytes = MaxHeldBytes::new(self.max_held_bytes)?.get();
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
            pool,
            capacity: max_held,
            capacity_kib: max_held_bytes / 1024,
            prefetch,
            receive: ReceiverConfig {
                max_messages: u8::try_from(receive_batch).unwrap_or(10),
                wait_time,
                system_attributes: self.system_attributes,
                max_rate,
            },
            visibility_timeout,
            coalescer: CoalescerConfig {
                max_batch: 10,
                max_wait: max_batch_wait,
                max_in_flight: max_batches_in_flight,
            },
            shutdown_timeout: self.shutdown_timeout,
            backoff: self.backoff,
            heartbeat: self.heartbeat.then_some(heartbeat_margin),
            fifo_order: self.fifo_order,
            on_handler_error,
            processing,
            pause: crate::receive::pause::PauseHandle::new(&queue_name),
            redrive,
            create_if_missing: self.create_if_missing,
            stats: Arc::new(StatsCells::default()),
            health: HealthCells::new(&queue_name, give_up_after),
            payloads: self.payloads,
        })
    }
}

/// The most receivers at once, unless told otherwise.
pub(crate) const DEFAULT_RECEIVERS: usize = 128;

/// Handler invocations at once, unless told otherwise.
const DEFAULT_WORKERS: usize = 64;

/// The most messages held at once, unless told otherwise.
const DEFAULT_MAX_HELD: usize = 4_096;

/// The most bytes of messages held at once, unless told otherwise: 64 MiB.
const DEFAULT_MAX_HELD_BYTES: usize = 64 << 20;

#[cfg(test)]
mod tests {
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

    #[test]
    fn an_error_backoff_out_of_its_range_is_refused() {
        use crate::ErrorBackoff;

        let minute = Duration::from_secs(60);
        refused(
            builder().on_handler_error(ErrorBackoff::new(Duration::ZERO, minute)),
            "on_handler_error",
        );
        refused(
            builder().on_handler_error(ErrorBackoff::new(minute, Duration::from_secs(1))),
            "on_handler_error",
        );
        refused(
            builder().on_handler_error(ErrorBackoff::new(minute, Duration::MAX)),
            "on_handler_error",
        );
        builder()
            .on_handler_error(ErrorBackoff::new(Duration::from_secs(5), MAX_VISIBILITY))
            .build()
            .expect("up to 12 hours");
        builder()
            .on_handler_error(crate::Outcome::Retry)
            .build()
            .expect("an outcome is a policy");
    }
}
