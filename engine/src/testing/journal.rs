//! The journal: every change the double applied to a message, in order, on tokio's clock.

use tokio::time::Instant;

/// One change the in-process SQS applied to a message; see [`InProcessSqs::journal`](crate::testing::InProcessSqs::journal).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Applied {
    /// When, on tokio's clock.
    pub at: Instant,
    /// The queue's name.
    pub queue: String,
    /// The message.
    pub message_id: String,
    /// What changed.
    pub change: Change,
}

/// What the in-process SQS applied to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// Sent (deduplicated FIFO sends are not).
    Sent {
        /// The FIFO group, when there is one.
        group_id: Option<String>,
    },
    /// Handed out by a receive, hidden for `visibility` seconds.
    Received {
        /// The receipt handle of this receive.
        receipt_handle: String,
        /// The message's receive count, this receive included.
        receive_count: u32,
        /// The visibility timeout it got, in seconds.
        visibility: u32,
        /// Handed out again while in flight, as a standard queue's at-least-once delivery may
        /// (see [`InProcessSqs::duplicate_deliveries`](crate::testing::InProcessSqs::duplicate_deliveries)):
        /// the receipt handles that held it still name it.
        duplicate: bool,
    },
    /// A delete answered with success: `removed` when the handle was the message's newest and
    /// the message is gone, `false` for an older handle or a message already deleted (SQS
    /// answers success there too, and deletes nothing).
    Deleted {
        /// The receipt handle the delete named.
        receipt_handle: String,
        /// Whether the message left the queue.
        removed: bool,
    },
    /// A visibility change applied: hidden for `seconds` from `at`.
    VisibilityChanged {
        /// The receipt handle the change named.
        receipt_handle: String,
        /// The new visibility timeout.
        seconds: u32,
    },
    /// Moved to the dead-letter queue by the redrive policy.
    DeadLettered {
        /// The dead-letter queue's name.
        dead_letter: String,
    },
    /// Gone with its queue, which was deleted (see
    /// [`InProcessSqs::delete_queue`](crate::testing::InProcessSqs::delete_queue)).
    QueueDeleted,
}
