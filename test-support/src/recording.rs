//! An [`SqsApi`] over LocalStack that records the batch calls the engine makes and their
//! answers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqs_engine::{
    AwsSqs, BoxFuture, CallError, EntryResult, ReceiveRequest, ReceivedMessage, SendEntry, SqsApi,
    SqsDecorator,
};

use crate::localstack::sdk_config;

/// A batch call the engine made, as LocalStack answered it.
#[derive(Debug, Clone)]
pub struct BatchCall {
    /// The call: `DeleteMessageBatch`, `ChangeMessageVisibilityBatch` or `SendMessageBatch`.
    pub action: &'static str,
    /// The receipt handle of each entry (a send's: its body).
    pub receipt_handles: Vec<String>,
    /// What LocalStack answered.
    pub result: Result<Vec<EntryResult>, CallError>,
}

/// What the engine sent and got, through [`Recording`].
#[derive(Debug, Default)]
pub struct Record {
    /// The batch calls, in the order they were answered.
    pub batches: Vec<BatchCall>,
    /// Receipt handle to message id, for every message received.
    pub received: HashMap<String, String>,
}

/// The receipt handle [`Recording`] gives the message it corrupts.
pub const INVALID_RECEIPT: &str = "not-a-valid-receipt-handle";

/// Forwards every call to LocalStack and records the batch calls and their answers. With
/// `corrupt_body` set, a received message with that body gets an invalid receipt handle
/// ([`INVALID_RECEIPT`]), so that LocalStack refuses its entry.
#[derive(Debug, Clone)]
pub struct Recording {
    inner: AwsSqs,
    /// What was recorded so far.
    pub record: Arc<Mutex<Record>>,
    corrupt_body: Option<String>,
    /// How long each `DeleteMessageBatch` waits before it goes to LocalStack.
    delete_delay: Duration,
}

impl Recording {
    /// A recording API on LocalStack, corrupting the receipt handle of the message whose body
    /// is `corrupt_body`.
    pub async fn new(corrupt_body: Option<&str>) -> Self {
        Self {
            inner: AwsSqs::from_sdk_config(&sdk_config().await),
            record: Arc::default(),
            corrupt_body: corrupt_body.map(str::to_owned),
            delete_delay: Duration::ZERO,
        }
    }

    /// The same, with every `DeleteMessageBatch` held back `delay` before it goes out: the
    /// delete lane stays busy that long, so settlements made meanwhile wait to share a call.
    #[must_use]
    pub fn with_delete_delay(mut self, delay: Duration) -> Self {
        self.delete_delay = delay;
        self
    }

    /// The batch calls so far.
    pub fn batches(&self) -> Vec<BatchCall> {
        self.record.lock().expect("lock").batches.clone()
    }

    fn log(
        &self,
        action: &'static str,
        handles: Vec<String>,
        result: &Result<Vec<EntryResult>, CallError>,
    ) {
        self.record.lock().expect("lock").batches.push(BatchCall {
            action,
            receipt_handles: handles,
            result: result.clone(),
        });
    }
}

impl SqsDecorator for Recording {
    type Inner = AwsSqs;

    fn inner(&self) -> &AwsSqs {
        &self.inner
    }

    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        Box::pin(async move {
            let mut messages = self.inner.receive(request).await?;
            let mut record = self.record.lock().expect("lock");
            for message in &mut messages {
                if self.corrupt_body.as_deref() == Some(message.body.as_str()) {
                    message.receipt_handle = INVALID_RECEIPT.to_owned();
                }
                record
                    .received
                    .insert(message.receipt_handle.clone(), message.message_id.clone());
            }
            Ok(messages)
        })
    }

    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        Box::pin(async move {
            tokio::time::sleep(self.delete_delay).await;
            let result = self
                .inner
                .delete_message_batch(queue_url, receipt_handles)
                .await;
            let handles = receipt_handles.iter().map(|h| (*h).to_owned()).collect();
            self.log("DeleteMessageBatch", handles, &result);
            result
        })
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        Box::pin(async move {
            let result = self
                .inner
                .change_message_visibility_batch(queue_url, entries)
                .await;
            let handles = entries.iter().map(|(h, _)| (*h).to_owned()).collect();
            self.log("ChangeMessageVisibilityBatch", handles, &result);
            result
        })
    }

    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        Box::pin(async move {
            let result = self.inner.send_message_batch(queue_url, entries).await;
            let bodies = entries.iter().map(|entry| entry.body.clone()).collect();
            self.log("SendMessageBatch", bodies, &result);
            result
        })
    }
}
