//! What a test harness learns from the double: messages becoming receivable on a watched
//! queue, leaving it, and when to look again.

use std::time::Duration;

/// What a test harness learns from the double: messages becoming receivable on a watched
/// queue, leaving it, and when to look again.
pub(crate) trait Observer: Send + Sync {
    /// One message became receivable on a watched queue.
    fn enqueued(&self);
    /// One message counted by [`enqueued`](Self::enqueued) is done with.
    fn consumed(&self);
    /// Calls `wake` after `delay` of tokio's clock.
    fn wake_after(&self, delay: Duration, wake: Box<dyn FnOnce() + Send>);
}
