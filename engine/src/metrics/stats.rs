//! The engine's own counters, readable without a recorder: the cells each queue's metrics
//! count into beside the `metrics` facade, and the [`Stats`] snapshot of them.

use std::sync::atomic::{AtomicU64, Ordering};

use super::names::Action;
use super::tally::{TALLIES, Tally};
use crate::handle::outcome::Outcome;
use crate::sqs::lane::Lane;

/// The shared counters behind [`Stats`]: one cell per [`Tally`], and the messages held.
#[derive(Debug)]
pub(crate) struct StatsCells {
    cells: [AtomicU64; TALLIES],
    held: AtomicU64,
}

impl Default for StatsCells {
    fn default() -> Self {
        Self {
            cells: std::array::from_fn(|_| AtomicU64::new(0)),
            held: AtomicU64::new(0),
        }
    }
}

impl StatsCells {
    /// Counts `n` more of `tally`.
    pub(super) fn add(&self, tally: Tally, n: u64) {
        self.cells[tally.index()].fetch_add(n, Ordering::Relaxed);
    }

    /// Messages held now: `n` more.
    pub(super) fn hold(&self, n: u64) {
        self.held.fetch_add(n, Ordering::Relaxed);
    }

    /// Messages held now: `n` fewer.
    pub(super) fn release(&self, n: u64) {
        self.held.fetch_sub(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let load = |tally: Tally| self.cells[tally.index()].load(Ordering::Relaxed);
        let count = |tally: &dyn Fn(bool) -> Tally| Count {
            ok: load(tally(true)),
            failed: load(tally(false)),
        };
        let call = |action: Action| count(&|ok| Tally::Call(action, ok));
        let settled = |outcome: Outcome| count(&|ok| Tally::Settled(outcome.index(), ok));
        Stats {
            receive_message: call(Action::ReceiveMessage),
            delete_message_batch: call(Action::DeleteMessageBatch),
            change_message_visibility_batch: call(Action::ChangeMessageVisibilityBatch),
            get_queue_url: call(Action::GetQueueUrl),
            get_queue_attributes: call(Action::GetQueueAttributes),
            set_queue_attributes: call(Action::SetQueueAttributes),
            create_queue: call(Action::CreateQueue),
            messages_received: load(Tally::Received),
            acked: settled(Outcome::Ack),
            dropped: settled(Outcome::Drop),
            retried: settled(Outcome::Retry),
            retried_after: settled(Outcome::RetryAfter(Default::default())),
            delete_entries: load(Tally::Entries(Lane::Delete)),
            visibility_entries: load(Tally::Entries(Lane::Visibility)),
            late_settlements: load(Tally::Late),
            unsettled: load(Tally::Unsettled),
            lapsed: load(Tally::Lapsed),
            returned_for_order: load(Tally::ReturnedForOrder),
            extensions: count(&Tally::Extension),
            at_last_receive: load(Tally::LastReceive),
            redrive_returns: load(Tally::Redrive),
            abandoned_receives: load(Tally::Abandoned),
            in_flight: self.held.load(Ordering::Relaxed),
        }
    }
}

/// Successes and failures of one kind of event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    /// How many succeeded.
    pub ok: u64,
    /// How many failed.
    pub failed: u64,
}

impl Count {
    /// Both together.
    pub fn total(&self) -> u64 {
        self.ok + self.failed
    }
}

/// A snapshot of what an engine has done so far, from its own counters: the same events the
/// `metrics` facade receives, readable without a recorder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// `ReceiveMessage` calls.
    pub receive_message: Count,
    /// `DeleteMessageBatch` calls.
    pub delete_message_batch: Count,
    /// `ChangeMessageVisibilityBatch` calls.
    pub change_message_visibility_batch: Count,
    /// `GetQueueUrl` calls.
    pub get_queue_url: Count,
    /// `GetQueueAttributes` calls.
    pub get_queue_attributes: Count,
    /// `SetQueueAttributes` calls.
    pub set_queue_attributes: Count,
    /// `CreateQueue` calls.
    pub create_queue: Count,
    /// Messages received.
    pub messages_received: u64,
    /// `ack` settlements answered.
    pub acked: Count,
    /// `drop` settlements answered.
    pub dropped: Count,
    /// `retry` settlements answered.
    pub retried: Count,
    /// `retry_after` settlements answered.
    pub retried_after: Count,
    /// Entries sent in `DeleteMessageBatch` calls, retries included.
    pub delete_entries: u64,
    /// Entries sent in `ChangeMessageVisibilityBatch` calls, retries included.
    pub visibility_entries: u64,
    /// Settlements applied after the message's visibility deadline.
    pub late_settlements: u64,
    /// Deliveries dropped without an outcome.
    pub unsettled: u64,
    /// Messages received but not handed out because their visibility lapsed while they
    /// waited: SQS hands them out again.
    pub lapsed: u64,
    /// FIFO messages returned unhandled because an earlier message of their group comes back.
    pub returned_for_order: u64,
    /// Visibility extensions by the heartbeat (entries, not calls).
    pub extensions: Count,
    /// Deliveries at the last receive the redrive policy allows.
    pub at_last_receive: u64,
    /// Drops at the redrive cap, returned for SQS to move to the dead-letter queue.
    pub redrive_returns: u64,
    /// Long polls still open at shutdown, given up without an answer. They were requests all
    /// the same: [`total_calls`](Self::total_calls) counts them.
    pub abandoned_receives: u64,
    /// Messages held now: received and not yet settled (prefetched, being handled, or with a
    /// settlement waiting for SQS's answer). Never more than the engine's `max_held`.
    pub in_flight: u64,
}

impl Stats {
    /// Every SQS call made, of every action, failed ones included.
    pub fn total_calls(&self) -> u64 {
        [
            self.receive_message,
            self.delete_message_batch,
            self.change_message_visibility_batch,
            self.get_queue_url,
            self.get_queue_attributes,
            self.set_queue_attributes,
            self.create_queue,
        ]
        .iter()
        .map(Count::total)
        .sum::<u64>()
            + self.abandoned_receives
    }

    /// Settlements answered with success, every outcome.
    pub fn settled_ok(&self) -> u64 {
        self.acked.ok + self.dropped.ok + self.retried.ok + self.retried_after.ok
    }

    /// Settlements answered with an error, every outcome.
    pub fn settled_failed(&self) -> u64 {
        self.acked.failed + self.dropped.failed + self.retried.failed + self.retried_after.failed
    }
}
