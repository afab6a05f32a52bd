//! # sqs-engine
//!
//! A consumer engine for Amazon SQS, built for high-throughput services.
//!
//! - Long-poll receivers feed a bounded pool of handler invocations; one slow message never
//!   holds up the others of its receive batch, and the engine never holds more messages than
//!   it can start.
//! - Each message's outcome ([`Outcome::Ack`], [`Outcome::Drop`], [`Outcome::Retry`],
//!   [`Outcome::RetryAfter`]) is settled on its own, with its own result, while the calls are
//!   coalesced into `DeleteMessageBatch` and `ChangeMessageVisibilityBatch` of up to ten
//!   entries.
//! - Transient failures (throttling, 5xx, connection errors), of a whole call or of one entry,
//!   are retried with backoff and jitter under a budget; a permanent failure is that one
//!   message's error.
//! - Shutdown sends every settlement a handler made before it returns.
//!
//! ## Settlement
//!
//! | outcome | SQS call | effect |
//! |---|---|---|
//! | ack | `DeleteMessage` | gone |
//! | drop | `DeleteMessage` (at the redrive cap: visibility 0) | gone, or on to the dead-letter queue |
//! | retry | `ChangeMessageVisibility(0)` | visible again at once |
//! | retry_after(d) | `ChangeMessageVisibility(d)`, whole seconds rounded up | back after d, within 12 h of the receive |
//! | none (handler panicked or was dropped) | no call | back when the visibility lapses |
//!
//! A batch flushes when it holds ten entries, when its oldest entry has waited
//! [`max_batch_wait`](EngineBuilder::max_batch_wait), or at once when no call of its kind is
//! in flight: one round trip when idle, full batches at full load. On a standard queue, a
//! delete batch that the messages still out would fill waits for them, with a call in flight or
//! none, so moderate loads send full batches too: up to twenty times `max_batch_wait` (at most
//! 100 ms, unless twice `max_batch_wait` is longer) under [`Engine::run`], where no handler
//! waits for the answer, and up to twice `max_batch_wait` for a [`Consumer`]'s deliveries,
//! whose answers may be awaited.
//! Entry ids are positions in the batch, and a receipt handle appears at most once per batch.
//!
//! ## Example
//!
//! ```no_run
//! use sqs_engine::{Engine, Message, Outcome};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let config = aws_config::load_from_env().await;
//! let engine = Engine::builder().sdk_config(&config).queue("orders").build()?;
//! let stats = engine
//!     .run(
//!         |message: Message| async move {
//!             println!("{}", message.body());
//!             Outcome::Ack
//!         },
//!         async { tokio::signal::ctrl_c().await.unwrap_or(()) },
//!     )
//!     .await?;
//! println!("{} SQS calls", stats.total_calls());
//! # Ok(())
//! # }
//! ```
//!
//! ## Metrics
//!
//! The engine reports through the [`metrics`](https://docs.rs/metrics) facade; install any
//! recorder to export them. [`Engine::stats`] reads the same counts without one. The metrics
//! are listed in [`mod@metrics`].
//!
//! ## Tracing
//!
//! Each message's handler runs in a `message` span at INFO, of the consumer kind, with
//! OpenTelemetry's messaging fields; a batch handler's in a `batch` span with the same fields,
//! and a [`Consumer`]'s deliveries give the same span through [`Delivery::span`]. With the
//! `opentelemetry` feature and a `tracing-opentelemetry` layer in the subscriber, the span's
//! parent is the sender's span: the W3C `traceparent` (and `tracestate`) message attributes,
//! else the X-Ray `AWSTraceHeader` system attribute; a batch span links to each message's
//! sender instead. The broker's publishers put the context of the span current when `publish`
//! is called on each message as `traceparent` and `tracestate`, unless its headers set `traceparent` or leave no room (SQS
//! carries ten message attributes).
//!
//! ## Testing
//!
//! With the `testing` feature, `sqs_engine::testing::InProcessSqs` is an SQS inside the test
//! process, on tokio's clock, that an engine runs against (`EngineBuilder::api`): a
//! `retry_after(60 s)` comes back after `tokio::time::advance(60 s)` on a paused clock. With
//! `ruststream` too, it is the broker's in-process mode for the framework's `TestApp`. It is a
//! test double; what the engine claims about SQS is proven against LocalStack.

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// Whether the deliberate defect `$name` (a [`testing::Defect`] variant) is switched on for
/// this thread: a simulation proves with it that its invariants catch the bug. Always `false`
/// without the `testing` feature, where nothing can switch it on.
macro_rules! defect {
    ($name:ident) => {{
        #[cfg(feature = "testing")]
        let on = $crate::testing::defect_on($crate::testing::Defect::$name);
        #[cfg(not(feature = "testing"))]
        let on = false;
        on
    }};
}
pub(crate) use defect;

pub mod api;
mod attribute;
#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod bench;
mod bounded;
mod engine;
mod error;
mod handle;
pub mod health;
mod large_payload;
pub mod limits;
pub mod metrics;
#[cfg(feature = "prometheus")]
pub mod prometheus;
mod publish;
pub mod queue_url;
mod receive;
mod room;
#[cfg(feature = "ruststream")]
pub mod ruststream;
mod settle;
mod sqs;
#[cfg(any(test, feature = "bench"))]
mod stand_in;
#[cfg(feature = "testing")]
pub mod testing;
mod worker_pool;

pub use api::{
    BoxFuture, CallError, CallErrorKind, EntryFailure, EntryResult, QueueAttributes,
    ReceiveRequest, ReceivedMessage, SendEntry, SqsApi, SqsDecorator,
};
pub use attribute::{AttributeValue, MessageAttribute};
pub use engine::{Engine, EngineBuilder, StatsHandle};
pub use error::{ConfigError, Error, SettleError};
pub use handle::error_policy::{ErrorBackoff, HandlerErrorPolicy};
pub use handle::handler::{BatchHandler, Handler, HandlerResult};
pub use handle::message::{
    GROUP_ID_ATTRIBUTE, Message, RECEIVE_COUNT_ATTRIBUTE, SENT_TIMESTAMP_ATTRIBUTE,
};
pub use handle::outcome::{BatchOutcome, Outcome};
pub use handle::sns_envelope::{SnsEnvelopeError, SnsNotification};
pub use handle::system_attributes::SystemAttributes;
pub use health::{Health, HealthHandle, Phase};
#[cfg(feature = "s3")]
pub use large_payload::LargePayloads;
pub use limits::MAX_VISIBILITY;
pub use metrics::{Count, Stats};
pub use publish::{OutgoingMessage, PublishError, Publisher, PublisherBuilder};
pub use receive::consumer::{Consumer, ConsumerHandle};
pub use receive::delivery::{Delivery, Ticket};
pub use receive::fifo::FifoOrder;
pub use receive::pause::PauseHandle;
pub use settle::Settlement;
pub use sqs::aws::{AwsSqs, DEFAULT_CALL_TIMEOUT};
pub use sqs::backoff::Backoff;
pub use sqs::redrive_policy::RedriveWrite;
pub use sqs::round_trip::RECEIVE_STOP_GRACE;
pub use worker_pool::{Share, WorkerPool};

/// The RustStream prelude with the SQS broker: `use sqs_engine::prelude::*;`. See
/// [`mod@ruststream`].
#[cfg(feature = "ruststream")]
pub use crate::ruststream::prelude;

/// The README's Rust examples, compiled (and the broker's run) as doctests so that they stay
/// true.
#[cfg(all(doctest, feature = "ruststream"))]
#[doc = include_str!("../../README.md")]
struct ReadmeExamples;
