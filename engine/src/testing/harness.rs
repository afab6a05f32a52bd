//! The hooks of the framework's test harness (feature `ruststream`): the observer installed,
//! the subscriptions watching a queue, and the deliveries counted.

use super::InProcessSqs;
use super::observer::Observer;
use crate::api::SqsDecorator;
use crate::api::{BoxFuture, CallError, ReceiveRequest, ReceivedMessage};
use crate::queue_url::last_segment;
use std::fmt;
use std::sync::Arc;

impl InProcessSqs {
    /// Installs a harness's observer, in place of an earlier one; messages receivable on
    /// watched queues are counted with it. Deliveries counted by an earlier observer are
    /// released to that one.
    pub(crate) fn observe(&self, observer: Arc<dyn Observer>) {
        let mut state = self.shared.lock();
        state.owed.clear();
        for queue in state.queues.values_mut() {
            for message in queue.messages.iter_mut() {
                message.counted = false;
            }
        }
        state.observer = Some(observer);
        let names: Vec<String> = state.queues.keys().cloned().collect();
        for name in names {
            self.refresh(&mut state, &name);
        }
    }

    /// Marks `queue` as read by a subscription until the returned guard drops: its receivable
    /// messages are counted with the observer.
    pub(crate) fn watch(&self, queue: &str) -> Watch {
        let name = last_segment(queue).to_owned();
        let mut state = self.shared.lock();
        state.next_id += 1;
        let id = state.next_id;
        if state.queue_or_create(&name).is_ok() {
            if let Some(queue) = state.queues.get_mut(&name) {
                queue.watchers.push(id);
            }
            self.refresh(&mut state, &name);
        }
        Watch {
            sqs: self.clone(),
            queue: name,
            id,
        }
    }

    /// Takes over the count of the receive `(message_id, receive_count)`: `Some` when the
    /// observer counted it, a guard that tells the observer when it drops.
    pub(crate) fn claim(&self, message_id: &str, receive_count: u32) -> Option<Counted> {
        let mut state = self.shared.lock();
        if state.owed.remove(&(message_id.to_owned(), receive_count)) {
            state.observer.clone().map(Counted)
        } else {
            None
        }
    }
}

/// A delivery the observer counted: dropped once the delivery is done with (settled and
/// answered, or dropped unsettled), it tells the observer.
pub(crate) struct Counted(Arc<dyn Observer>);

impl fmt::Debug for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Counted")
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.consumed();
    }
}

/// A subscription reading a queue of an [`InProcessSqs`]; see [`InProcessSqs::watch`].
pub(crate) struct Watch {
    sqs: InProcessSqs,
    queue: String,
    id: u64,
}

impl Watch {
    /// The [`SqsApi`](crate::SqsApi) the watching subscription receives through.
    pub(crate) fn reader(&self) -> Reader {
        Reader {
            sqs: self.sqs.clone(),
            id: self.id,
        }
    }
}

/// One subscription's view of an [`InProcessSqs`]: where a queue has several subscriptions,
/// only the oldest receives, so which one a message reaches is known before it is sent (the
/// framework's harness asks). On SQS any of them may; a test of competing consumers belongs
/// on LocalStack.
pub(crate) struct Reader {
    sqs: InProcessSqs,
    id: u64,
}

impl SqsDecorator for Reader {
    type Inner = InProcessSqs;

    fn inner(&self) -> &InProcessSqs {
        &self.sqs
    }

    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        self.sqs.receive_as(Some(self.id), request)
    }
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch").field("queue", &self.queue).finish()
    }
}

impl Drop for Watch {
    /// The last subscription of a queue gone, what was counted receivable there is no longer
    /// waited for.
    fn drop(&mut self) {
        let mut state = self.sqs.shared.lock();
        let observer = state.observer.clone();
        let Some(queue) = state.queues.get_mut(&self.queue) else {
            return;
        };
        queue.watchers.retain(|id| *id != self.id);
        // The next subscription, if any, receives now.
        self.sqs.shared.arrived.notify_waiters();
        if !queue.watchers.is_empty() {
            return;
        }
        for message in queue.messages.iter_mut() {
            if message.counted {
                message.counted = false;
                if let Some(observer) = &observer {
                    observer.consumed();
                }
            }
        }
    }
}
