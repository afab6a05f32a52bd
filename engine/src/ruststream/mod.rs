//! The broker for the [RustStream](https://docs.rs/ruststream) framework, on the engine.
//!
//! Services written against the framework run on SQS with `use sqs_engine::prelude::*;`:
//!
//! ```no_run
//! use sqs_engine::prelude::*;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! struct Order {
//!     id: u64,
//! }
//!
//! #[subscriber(SqsQueue::new("orders").create_if_missing())]
//! async fn handle(order: &Order) -> HandlerOutcome {
//!     tracing::info!(order.id, "order");
//!     HandlerOutcome::ack()
//! }
//!
//! fn app() -> impl App {
//!     RustStream::new(AppInfo::new("orders", "0.1.0")).with_broker(
//!         SqsBroker::new().endpoint("http://localhost:4566").region("us-east-1").test_credentials(),
//!         |b| {
//!             b.include(handle);
//!         },
//!     )
//! }
//! # fn main() { let _ = app(); }
//! ```
//!
//! ## Settlement
//!
//! Every outcome is an entry of the engine's coalesced batch calls. Its future resolves once the
//! entry is queued, so that the worker moves on while the call is under way: a settlement SQS
//! refuses is logged with the message id and counted, and the message comes back when its
//! visibility lapses. On a FIFO queue the group's next message starts only once SQS has
//! confirmed the settlement. With [`SqsBroker::confirm_settlements`] the future resolves when
//! SQS has applied it:
//!
//! | outcome | call | in the engine |
//! |---|---|---|
//! | `ack()` | `DeleteMessageBatch` | [`Outcome::Ack`](crate::Outcome::Ack) |
//! | `drop()` | `DeleteMessageBatch`; at the redrive cap, visibility 0 | [`Outcome::Drop`](crate::Outcome::Drop) |
//! | `retry()` | `ChangeMessageVisibilityBatch(0)` | [`Outcome::Retry`](crate::Outcome::Retry) |
//! | `retry_after(d)` | `ChangeMessageVisibilityBatch(d)`, whole seconds rounded up | [`Outcome::RetryAfter`](crate::Outcome::RetryAfter) |
//!
//! A retry never leaves the queue. `max_attempts(n)` and `dead_letter(q)` at the mount site are
//! the queue's redrive policy, written when the subscription opens, and SQS moves a spent
//! message itself: subscriptions have `Copies = BrokerMoves`, so `.out_retry(..)` does not
//! compile on them:
//!
//! ```compile_fail,E0277
//! use sqs_engine::prelude::*;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize, Serialize, Outgoing)]
//! #[outgoing(name = "invoices")]
//! struct Invoice {
//!     id: u64,
//! }
//!
//! #[subscriber(SqsQueue::new("invoices"))]
//! async fn settle(invoice: &Invoice) -> HandlerOutcome {
//!     HandlerOutcome::retry()
//! }
//!
//! fn app() -> impl App {
//!     RustStream::new(AppInfo::new("invoices", "0.1.0")).with_broker(SqsBroker::new(), |b| {
//!         b.include(settle).out_retry(Publish::default()).build();
//!     })
//! }
//! # fn main() {}
//! ```
//!
//! ## Messages
//!
//! Headers travel as message attributes (at most ten, none empty: a publish that breaks either
//! rule is refused with an error, never sent without a header). A body that is not text SQS
//! takes travels base64, marked by an attribute the receiving side reads. Each delivery carries
//! its `ApproximateReceiveCount` as [`RECEIVE_COUNT_HEADER`] and as its redelivery count.
//!
//! A FIFO message's group is its partition key: a delivery carries it as
//! [`PARTITION_KEY_HEADER`] (and as `partition_key()`, which the framework's keyed workers
//! read), and a publish to a FIFO queue that names no group of its own takes that header's
//! value as its group, as the framework's in-memory broker and `ruststream-sqs-sns` do.
//!
//! ## Queue names
//!
//! Characters SQS refuses in a queue name become `-` ([`queue_name`]), a `.fifo` suffix is
//! kept, and a queue URL is used as it is.

#[cfg(feature = "asyncapi")]
mod bindings;
mod broker;
mod connection;
#[cfg(feature = "asyncapi")]
mod describe;
mod error;
#[cfg(feature = "sns")]
mod fan_out;
mod harness;
#[cfg(feature = "testing")]
mod in_process;
mod message;
mod publish;
mod queue;
#[cfg(feature = "sns")]
mod queue_policy;
#[cfg(feature = "sns")]
mod sns;
#[cfg(feature = "s3")]
mod stored;
mod subscriber;
#[cfg(feature = "sns")]
mod topic;

pub use broker::SqsBroker;
pub use connection::ConnectedSqsBroker;
pub use error::SqsError;
pub use message::SqsMessage;
pub use publish::{SqsPublish, SqsPublishOptions, SqsPublishSteps, SqsPublisher};
pub use queue::{SqsQueue, SqsSubscription, queue_name};
#[cfg(feature = "sns")]
pub use sns::{SnsPublish, SnsPublisher};
pub use subscriber::SqsSubscriber;

/// The header that carries a delivery's receive count, SQS's `ApproximateReceiveCount`: `1` on
/// the first delivery. The same name as in `ruststream-sqs-sns`.
pub const RECEIVE_COUNT_HEADER: &str = "sqs-receive-count";

/// The header that carries a message's partition key, the FIFO message group.
///
/// On a delivery from a FIFO queue it holds the message's group. On a publish to a FIFO
/// queue it is the group, unless the call's [`SqsPublishSteps::group_id`] names one: it comes
/// after the call's own group and before the mount site's [`SqsPublish::group_id`]; it is not
/// sent as a message attribute there, since the group carries it. On a standard queue, which
/// has no groups, it travels as an ordinary message attribute, and is still the delivery's
/// partition key. The name is the framework's (its in-memory broker's) and
/// `ruststream-sqs-sns`'s, so keyed services move between them unchanged.
pub const PARTITION_KEY_HEADER: &str = "partition-key";

/// Everything a RustStream service on SQS uses: the framework's prelude, the broker, its
/// mount-site settings ([`SqsSubscription`]), and [`SqsPublish`] under the name `Publish`.
///
/// The engine's own `Message`, `Outcome`, `Handler` and `Delivery` are left out: the
/// framework has items of those names.
pub mod prelude {
    pub use ::ruststream::prelude::*;

    pub use super::SqsPublish as Publish;
    pub use super::{
        ConnectedSqsBroker, PARTITION_KEY_HEADER, RECEIVE_COUNT_HEADER, SqsBroker, SqsError,
        SqsMessage, SqsPublish, SqsPublishOptions, SqsPublishSteps, SqsPublisher, SqsQueue,
        SqsSubscription,
    };
    #[cfg(feature = "sns")]
    pub use super::{SnsPublish, SnsPublisher};
}
