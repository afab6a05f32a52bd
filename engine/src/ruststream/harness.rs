//! What the broker tells a test harness that runs it in process: the framework's test mode
//! connects it to the in-process SQS (`in_process.rs`, feature `testing`), which counts what
//! is in flight; connected to SQS, there is no harness and none of this runs.

use std::sync::Arc;

use crate::api::SqsApi;

/// Held while the harness counts something (a delivery until its settlement is answered, a
/// subscription's watch on its queue): the count ends when it is dropped.
pub(crate) type Held = Box<dyn Send + Sync>;

/// The harness a broker connected in process reports to.
pub(crate) trait Harness: Send + Sync {
    /// Starts watching `queue` for a subscription about to open, so that nothing it receives
    /// escapes the count: the SQS the subscription receives through, and the watch, which
    /// ends when dropped.
    fn watch(&self, queue: &str) -> (Arc<dyn SqsApi>, Held);

    /// Takes over the count of the delivery of `message_id` at `receive_count`, when the
    /// harness counted it: it ends when the returned value is dropped.
    fn claim(&self, message_id: &str, receive_count: u32) -> Option<Held>;

    /// Subscribes `queue` to `topic`, as an operator would have.
    ///
    /// # Errors
    ///
    /// Why the topic cannot deliver to the queue.
    #[cfg(feature = "sns")]
    fn subscribe_to_topic(&self, topic: &str, queue: &str) -> Result<(), String>;

    /// The harness itself, for the in-process mode that installed it.
    #[cfg(feature = "testing")]
    fn as_any(&self) -> &dyn std::any::Any;
}
