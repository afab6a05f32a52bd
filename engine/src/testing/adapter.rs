//! [`SqsApi`] for the double: the calls checked as SQS checks them, and a long poll
//! without a timer.

use super::InProcessSqs;
use super::errors::{invalid, not_found};
use super::model::rules::{MAX_BATCH_ENTRIES, check_batch};
use crate::api::{
    BoxFuture, CallError, EntryResult, QueueAttributes, ReceiveRequest, ReceivedMessage, SendEntry,
    SqsApi,
};
use crate::bounded::WaitTime;
use crate::limits::MAX_VISIBILITY_SECS;
use crate::queue_url::last_segment;

impl InProcessSqs {
    pub(super) fn url_of(&self, url: &str) -> Result<String, CallError> {
        let name = last_segment(url);
        if self.shared.lock().queues.contains_key(name) {
            Ok(name.to_owned())
        } else {
            Err(not_found(url))
        }
    }

    /// A batch call of `entries` entries on the queue at `queue_url`: refused as SQS refuses a
    /// missing queue or a batch of no entries or too many, else `apply`, given the queue's name.
    fn batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: usize,
        apply: impl FnOnce(&str) -> Result<Vec<EntryResult>, CallError> + Send + 'a,
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        Box::pin(async move {
            let name = self.url_of(queue_url)?;
            check_batch(entries)?;
            apply(&name)
        })
    }

    /// A receive by the subscription `reader` (none: any caller, which always receives).
    pub(super) fn receive_as<'a>(
        &'a self,
        reader: Option<u64>,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        Box::pin(async move {
            self.url_of(request.queue_url)?;
            if !(1..=MAX_BATCH_ENTRIES).contains(&usize::from(request.max_messages)) {
                return Err(invalid(
                    "InvalidParameterValue",
                    "MaxNumberOfMessages must be 1 to 10",
                ));
            }
            if request.wait_time > WaitTime::MAX {
                return Err(invalid(
                    "InvalidParameterValue",
                    "WaitTimeSeconds must be 0 to 20",
                ));
            }
            if request.visibility_timeout > MAX_VISIBILITY_SECS {
                return Err(invalid(
                    "InvalidParameterValue",
                    "VisibilityTimeout must be 0 to 43200",
                ));
            }
            loop {
                let arrived = self.shared.arrived.notified();
                tokio::pin!(arrived);
                arrived.as_mut().enable();
                // The queue may have been deleted while the poll waited.
                let name = self.url_of(request.queue_url)?;
                let received = self.receive_now(&name, reader, request);
                if !received.is_empty() || request.wait_time.is_zero() {
                    return Ok(received);
                }
                arrived.await;
            }
        })
    }
}

impl SqsApi for InProcessSqs {
    fn queue_url<'a>(&'a self, queue_name: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async move {
            let mut state = self.shared.lock();
            Ok(state.queue_or_create(queue_name)?.url.clone())
        })
    }

    fn create_queue<'a>(
        &'a self,
        queue_name: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async move {
            let mut state = self.shared.lock();
            let url = state.queue_or_create(queue_name)?.url.clone();
            state.set_attributes(queue_name, attributes)?;
            Ok(url)
        })
    }

    fn queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
    ) -> BoxFuture<'a, Result<QueueAttributes, CallError>> {
        Box::pin(async move {
            let state = self.shared.lock();
            let queue = state
                .queues
                .get(last_segment(queue_url))
                .ok_or_else(|| not_found(queue_url))?;
            let redrive_policy = queue.redrive.as_ref().and_then(|redrive| {
                let arn = &state.queues.get(&redrive.dead_letter)?.arn;
                Some(format!(
                    r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":{}}}"#,
                    redrive.max_receive_count
                ))
            });
            Ok(QueueAttributes {
                arn: Some(queue.arn.clone()),
                visibility_timeout: Some(queue.visibility),
                fifo: queue.fifo,
                redrive_policy,
                policy: queue.policy.clone(),
            })
        })
    }

    fn set_queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<(), CallError>> {
        Box::pin(async move {
            let name = last_segment(queue_url);
            let mut state = self.shared.lock();
            state.set_attributes(name, attributes)?;
            self.refresh(&mut state, name);
            Ok(())
        })
    }

    /// Hands out what is receivable; with a wait time and nothing there, waits until something
    /// is, with no timer (see the [module docs](crate::testing)).
    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        self.receive_as(None, request)
    }

    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        self.batch(queue_url, receipt_handles.len(), |name| {
            Ok(self.delete(name, receipt_handles))
        })
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        self.batch(queue_url, entries.len(), |name| {
            Ok(self.change_visibility(name, entries))
        })
    }

    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        self.batch(queue_url, entries.len(), |name| {
            self.send_batch(name, entries)
        })
    }
}
