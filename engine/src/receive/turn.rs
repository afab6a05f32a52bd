//! A FIFO group's turn, as the delivery that has it holds it: ending it tells the group's gate
//! (`fifo.rs`) how the message left, so that the next of the group may start, or the rest of
//! the group go back. A leaf: the gate holds deliveries and a delivery holds its turn, without
//! the two modules importing each other.

use std::sync::Arc;

use tokio::time::Instant;

/// How a turn's message left the consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Deleted from the queue: the group goes on.
    Deleted,
    /// Back in the queue, visible again at this time: the rest of the group goes back too,
    /// visible no earlier. (SQS would hold the group back while the message is hidden anyway;
    /// an emulator that does not, LocalStack among them, would otherwise hand the rest out
    /// first.)
    BackAt(Instant),
}

/// What a turn ends through: the gate of its group.
pub(crate) trait TurnKeeper: Send + Sync {
    /// `group`'s turn, that of the message `message_id`, ended with `fate`.
    fn end_turn(self: Arc<Self>, group: &Arc<str>, message_id: &str, fate: Fate);
}

/// A delivery's turn in its group; ends when its message's fate is known. Held by its ticket.
pub(crate) struct Turn {
    keeper: Arc<dyn TurnKeeper>,
    group: Arc<str>,
    /// The message whose turn it is.
    message_id: Arc<str>,
    waits_for_answer: bool,
}

impl Turn {
    pub(crate) fn new(
        keeper: Arc<dyn TurnKeeper>,
        group: Arc<str>,
        message_id: Arc<str>,
        waits_for_answer: bool,
    ) -> Self {
        Self {
            keeper,
            group,
            message_id,
            waits_for_answer,
        }
    }

    /// Whether the next message of the group waits for SQS's answer to this one's settlement.
    pub(crate) fn waits_for_answer(&self) -> bool {
        self.waits_for_answer
    }

    /// The message's settlement is known (or, when the group does not wait for the answer,
    /// its entry is queued).
    pub(crate) fn end(self, fate: Fate) {
        self.keeper.end_turn(&self.group, &self.message_id, fate);
    }
}
