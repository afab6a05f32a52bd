//! Publishing to SQS queues (and with feature `sns`, the broker's topics): [`Publisher`], the
//! messages it takes ([`OutgoingMessage`]) and its errors ([`PublishError`]).
//!
//! A publisher keeps one line of waiting messages per destination, driven by its own task
//! (`driver`): the line's batches go out in `SendMessageBatch` (or `PublishBatch`) calls under
//! a byte budget, and each message is answered with its own entry's result. The RustStream
//! broker's publishers queue their entries through a `Publisher` too.

mod driver;
mod error;
mod message;
mod publisher;
mod services;
mod target;
#[cfg(feature = "sns")]
mod topic;

#[cfg(feature = "ruststream")]
pub(crate) use driver::Answer;
pub use error::PublishError;
pub use message::OutgoingMessage;
#[cfg(feature = "ruststream")]
pub(crate) use message::check_id;
pub use publisher::{Publisher, PublisherBuilder};
#[cfg(feature = "ruststream")]
pub(crate) use services::Services;
#[cfg(feature = "ruststream")]
pub(crate) use target::Target;
#[cfg(feature = "sns")]
pub(crate) use topic::topic_arn;
