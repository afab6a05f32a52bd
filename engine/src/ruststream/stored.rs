//! A publish whose body goes to S3 before its entry is queued (see
//! [`SqsBroker::large_payloads`](super::SqsBroker::large_payloads)).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::oneshot;

use super::connection::Core;
use super::error::SqsError;
use crate::LargePayloads;
use crate::api::SendEntry;
use crate::publish::Target;

/// The answer to come for a queued publish, or why it was not queued.
type Answer = Result<oneshot::Receiver<crate::publish::Answer>, SqsError>;

/// A built entry whose body is to be stored in S3.
pub(super) struct ToStore {
    pub(super) core: Arc<Core>,
    pub(super) payloads: Arc<LargePayloads>,
    /// The destination, as the publish named it.
    pub(super) destination: String,
    /// The queue it goes to.
    pub(super) target: String,
    pub(super) entry: SendEntry,
}

impl ToStore {
    /// Stores the body, then queues the entry with the pointer in its place.
    ///
    /// # Errors
    ///
    /// [`SqsError::Publish`] when the body could not be stored; as
    /// [`Publisher::enqueue`](crate::Publisher) otherwise.
    ///
    /// Boxed: the publish future a framework's handler awaits stays as shallow as without S3
    /// (a deeper one can pass the compiler's recursion limit in a service's own crate).
    pub(super) fn store_and_enqueue(mut self) -> Pin<Box<dyn Future<Output = Answer> + Send>> {
        Box::pin(async move {
            self.payloads
                .store(&mut self.entry)
                .await
                .map_err(|reason| SqsError::Publish {
                    destination: self.destination.clone(),
                    source: reason.into(),
                })?;
            enqueue(&self.core, &self.destination, self.target, self.entry)
        })
    }
}

/// Queues `entry` for `target`, sized as it now is.
pub(super) fn enqueue(
    core: &Arc<Core>,
    destination: &str,
    target: String,
    entry: SendEntry,
) -> Answer {
    let bytes = entry.size();
    core.publisher()
        .publishing()
        .enqueue(destination, Target::Queue(target), entry, bytes)
        .map_err(SqsError::from)
}
