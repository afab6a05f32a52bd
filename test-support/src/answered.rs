//! [`Answered`]: an SQS API whose deletes or visibility changes the test answers (refused,
//! failed entry by entry, held back on their way to SQS), every other call as the API
//! underneath answers it.

use sqs_engine::{BoxFuture, CallError, EntryResult, SqsApi, SqsDecorator};

/// What answers a `DeleteMessageBatch` for [`Answered`]: given the API underneath, the queue
/// URL and the receipt handles, SQS's answer (which it may ask the API underneath for).
pub trait DeleteAnswer<S>:
    for<'a> Fn(&'a S, &'a str, &'a [&'a str]) -> BoxFuture<'a, Answer> + Send + Sync + 'static
{
}

impl<S, F> DeleteAnswer<S> for F where
    F: for<'a> Fn(&'a S, &'a str, &'a [&'a str]) -> BoxFuture<'a, Answer> + Send + Sync + 'static
{
}

/// What answers a `ChangeMessageVisibilityBatch` for [`Answered`]: given the API underneath,
/// the queue URL and the entries (receipt handle, seconds), SQS's answer.
pub trait VisibilityAnswer<S>:
    for<'a> Fn(&'a S, &'a str, &'a [(&'a str, u32)]) -> BoxFuture<'a, Answer> + Send + Sync + 'static
{
}

impl<S, F> VisibilityAnswer<S> for F where
    F: for<'a> Fn(&'a S, &'a str, &'a [(&'a str, u32)]) -> BoxFuture<'a, Answer>
        + Send
        + Sync
        + 'static
{
}

/// SQS's answer to a batch call.
pub type Answer = Result<Vec<EntryResult>, CallError>;

/// `inner`, with the calls the test answers: [`deletes`](Self::deletes) and
/// [`visibility_changes`](Self::visibility_changes); each call not answered goes to `inner`.
pub struct Answered<S> {
    inner: S,
    deletes: Box<dyn DeleteAnswer<S>>,
    visibility_changes: Box<dyn VisibilityAnswer<S>>,
}

impl<S: SqsApi> Answered<S> {
    /// `inner`, with every call as it answers it.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            deletes: Box::new(|inner: &S, queue_url, receipt_handles| {
                inner.delete_message_batch(queue_url, receipt_handles)
            }),
            visibility_changes: Box::new(|inner: &S, queue_url, entries| {
                inner.change_message_visibility_batch(queue_url, entries)
            }),
        }
    }

    /// The deletes answered by `answer`.
    #[must_use]
    pub fn deletes(mut self, answer: impl DeleteAnswer<S>) -> Self {
        self.deletes = Box::new(answer);
        self
    }

    /// The visibility changes answered by `answer`.
    #[must_use]
    pub fn visibility_changes(mut self, answer: impl VisibilityAnswer<S>) -> Self {
        self.visibility_changes = Box::new(answer);
        self
    }
}

impl<S: SqsApi> SqsDecorator for Answered<S> {
    type Inner = S;

    fn inner(&self) -> &S {
        &self.inner
    }

    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        (self.deletes)(&self.inner, queue_url, receipt_handles)
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        (self.visibility_changes)(&self.inner, queue_url, entries)
    }
}
