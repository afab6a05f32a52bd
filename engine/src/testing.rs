//! An SQS that lives in the test process, for tests on a paused clock.
//!
//! [`InProcessSqs`] implements [`SqsApi`](crate::SqsApi), so an [`Engine`](crate::Engine)
//! (or, with the `ruststream` feature, the RustStream broker's in-process mode) runs against it
//! unchanged. It keeps its time on tokio's clock: under `#[tokio::test(start_paused = true)]` a
//! `retry_after(60 s)` comes back after `tokio::time::advance(60 s)`, with no real waiting.
//!
//! It is a test double. It models what the engine relies on, and refuses what SQS refuses
//! there; correctness claims about SQS itself are proven against LocalStack. Its messages are
//! kept in the crate's one SQS model ([`model::Messages`]), which the load test's embedded
//! server runs on too.
//!
//! What it models:
//!
//! - Queues, standard and FIFO (by the `.fifo` suffix), created on first use: every queue a
//!   service names exists here, as it does on an account an operator provisioned.
//! - Send (one and batch) with the limits SQS checks: an empty body, characters SQS refuses,
//!   more than ten message attributes, an empty attribute value, more than 1 MiB per message
//!   or per batch, more than ten entries, a FIFO send without a group id, a deduplication id on
//!   a standard queue. A FIFO queue remembers deduplication ids for five minutes.
//! - Receive: at most ten messages, each with a fresh receipt handle, its
//!   `ApproximateReceiveCount`, `SentTimestamp`, and on FIFO queues `MessageGroupId`. A FIFO
//!   group with a message in flight hands out nothing more until that message is deleted or
//!   visible again; a FIFO receive hands out as many consecutive messages of one group as it
//!   can before the next group's, the group with the oldest message first, as SQS documents.
//! - Visibility on tokio's clock: a received message is invisible until deleted, changed, or
//!   its timeout lapses; a change is refused past twelve hours from the receive, and for a
//!   message no longer in flight. Only the newest receipt handle of a message deletes it: an
//!   older one is answered with success and deletes nothing, as SQS does.
//! - With the `sns` feature, topics: a queue subscribed to a topic receives each message
//!   published to it, body and attributes as published (raw delivery), at once; see
//!   [`InProcessSqs::subscribe_to_topic`].
//! - The redrive policy: a message received `maxReceiveCount` times moves to the dead-letter
//!   queue, with its receive count, when a receive comes upon it again, as SQS does it.
//!
//! - Deleting a queue ([`InProcessSqs::delete_queue`]): every call naming it after is refused
//!   with `AWS.SimpleQueueService.NonExistentQueue`, its waiting long polls included.
//! - A journal, when made with [`InProcessSqs::journaled`]: every change it applied (a send, a
//!   receive, a delete, a visibility change, a move to the dead-letter queue), in order and with
//!   the time on tokio's clock, for a test to check what a consumer did from the queue's side
//!   rather than from the consumer's own counters.
//!
//! What it does not model: a long poll has no timer. A receive with a wait time waits until a
//! message is there, however long that takes (on a paused clock, a timer would move the clock
//! forward whenever the test idles). Throttling, outages, message retention and the
//! distributed "approximate" nature of standard queues (reordering) are not modelled;
//! duplicates only when switched on ([`InProcessSqs::duplicate_deliveries`]): a standard queue
//! hands out its visible messages in the order they were sent, one
//! visible again after a receive included (SQS's "best-effort ordering"). The fault-injection suite runs
//! against LocalStack for those.
mod adapter;
mod defect;
mod deleted;
mod depth;
mod duplicates;
mod errors;
#[cfg(feature = "ruststream")]
mod harness;
mod in_process;
mod journal;
pub mod model;
mod observer;
mod operations;
mod queue;
mod receipt;
mod sent;
#[cfg(feature = "sns")]
mod sns;
mod store;
#[cfg(test)]
mod tests;
#[cfg(feature = "sns")]
mod topic;
#[cfg(test)]
pub(crate) mod unit;

pub(crate) use defect::defect_on;
pub use defect::{Defect, DefectGuard, inject_defect};
pub use depth::{QueueDepth, queue_depth};
pub use in_process::{InProcessSqs, QueueCounts};
pub use journal::{Applied, Change};
#[cfg(feature = "ruststream")]
pub(crate) use observer::Observer;
pub use sent::SentMessage;
