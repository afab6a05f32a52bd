//! The seam between the engine and SQS: the calls it makes, as a trait.
//!
//! [`SqsApi`] is what the engine calls; [`AwsSqs`](crate::AwsSqs) implements it over
//! `aws-sdk-sqs`. Another implementation can wrap it, to observe or shape the calls the engine
//! makes ([`SqsDecorator`] forwards what such a wrapper leaves alone), or stand in for SQS
//! altogether. None of the types here are `aws-sdk-sqs` types.
//!
//! Every item here is also at the crate root (`sqs_engine::SqsApi` is
//! `sqs_engine::api::SqsApi`).
//!
//! Layout: the trait (this file), what its calls take and return (`message.rs`), how a batch
//! entry ends (`entry.rs`), a failed call (`error.rs`) and the forwarding wrapper
//! (`decorator.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

mod decorator;
mod entry;
mod error;
mod message;

pub use decorator::SqsDecorator;
pub use entry::{EntryFailure, EntryResult};
pub(crate) use error::is_throttling_code;
pub use error::{CallError, CallErrorKind};
pub use message::{QueueAttributes, ReceiveRequest, ReceivedMessage, SendEntry};

/// A boxed, `Send` future, as returned by [`SqsApi`] methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The SQS calls the engine makes.
///
/// Batch methods answer with one [`EntryResult`] per request entry, in the order of the
/// request, whatever order SQS listed them in. An implementation must not retry on its own:
/// the engine retries transient failures itself, with backoff and jitter, and counts them.
pub trait SqsApi: Send + Sync + 'static {
    /// Resolves a queue name to its URL (`GetQueueUrl`).
    fn queue_url<'a>(&'a self, queue_name: &'a str) -> BoxFuture<'a, Result<String, CallError>>;

    /// Creates a queue, or finds the one of that name (`CreateQueue`); returns its URL.
    fn create_queue<'a>(
        &'a self,
        queue_name: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<String, CallError>>;

    /// Reads the attributes the engine needs (`GetQueueAttributes`).
    fn queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
    ) -> BoxFuture<'a, Result<QueueAttributes, CallError>>;

    /// Writes queue attributes (`SetQueueAttributes`).
    fn set_queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<(), CallError>>;

    /// Long-polls for messages (`ReceiveMessage`), asking for every system and message
    /// attribute.
    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>>;

    /// Deletes up to ten messages (`DeleteMessageBatch`).
    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>>;

    /// Changes the visibility of up to ten messages (`ChangeMessageVisibilityBatch`); each
    /// entry is a receipt handle and the new timeout in seconds.
    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>>;

    /// Sends up to ten messages (`SendMessageBatch`) to one queue.
    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>>;
}

/// An `Arc` of an API is that API, so one API (a `dyn SqsApi` too) can serve several engines
/// and brokers, and a test keep a handle on the one it handed over.
impl<T: SqsApi + ?Sized> SqsApi for Arc<T> {
    fn queue_url<'a>(&'a self, queue_name: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        (**self).queue_url(queue_name)
    }

    fn create_queue<'a>(
        &'a self,
        queue_name: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        (**self).create_queue(queue_name, attributes)
    }

    fn queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
    ) -> BoxFuture<'a, Result<QueueAttributes, CallError>> {
        (**self).queue_attributes(queue_url)
    }

    fn set_queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<(), CallError>> {
        (**self).set_queue_attributes(queue_url, attributes)
    }

    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        (**self).receive(request)
    }

    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        (**self).delete_message_batch(queue_url, receipt_handles)
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        (**self).change_message_visibility_batch(queue_url, entries)
    }

    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        (**self).send_message_batch(queue_url, entries)
    }
}
