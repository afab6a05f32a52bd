//! Deleting a queue: what the double answers once a queue is gone.

use super::InProcessSqs;
use super::journal::Change;

impl InProcessSqs {
    /// Deletes the queue `queue` (a name or URL) with its messages, as `DeleteQueue` does:
    /// from now on every call naming it (a receive already waiting included, and a send, or
    /// a `GetQueueUrl` or `CreateQueue` that would otherwise make it anew) is refused with
    /// `AWS.SimpleQueueService.NonExistentQueue`. The journal notes each message it held as
    /// gone with it. Whether the queue existed or not, the name is refused after.
    pub fn delete_queue(&self, queue: &str) {
        let name = crate::queue_url::last_segment(queue).to_owned();
        let mut state = self.shared.lock();
        let gone: Vec<String> = state
            .queues
            .remove(&name)
            .map(|queue| {
                queue
                    .messages
                    .in_send_order()
                    .into_iter()
                    .map(|message| message.data.id.clone())
                    .collect()
            })
            .unwrap_or_default();
        for message_id in gone {
            state.note(&name, &message_id, Change::QueueDeleted);
        }
        state.deleted.insert(name);
        drop(state);
        // The long polls waiting on it look again, and find it gone.
        self.shared.arrived.notify_waiters();
    }
}
