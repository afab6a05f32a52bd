//! The workers' demand for messages as a receive comes back: whether the receivers outrun
//! the workers (one ends) or the workers are short of messages (more may start).

/// The fewest receive batches waiting for a worker past which a receiver that brought a full
/// batch ends (it is not the last), when no worker waited for messages during its call: the
/// receivers outrun the workers, and more of them would only hold more messages. Past this
/// floor, the bound is two batches per receiver running: more waiting than two rounds of
/// receives bring (one round would leave workers idle whenever the receives' answers bunch).
const WAITING_BATCHES_TO_SHRINK: usize = 4;

/// Receive batches waiting for a worker below which the workers are about to be short of
/// messages: a full receive may start another receiver even if no worker waited yet.
const WAITING_BATCHES_TO_GROW: usize = 2;

/// The workers' demand for messages as a receive came back (see `ReceiverCount::after_batch`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Demand {
    /// A taker waited for a receive during the call.
    pub(super) takers_waited: bool,
    /// Messages received and waiting for a worker, besides the batch just received.
    pub(super) waiting: usize,
    /// A full receive batch.
    pub(super) batch: usize,
}

impl Demand {
    /// Whether the receivers outrun the workers with `active` running: no taker waited, and
    /// more batches wait than two rounds of receives bring (two per receiver running, at least
    /// [`WAITING_BATCHES_TO_SHRINK`]).
    pub(super) fn outrunning(self, active: usize) -> bool {
        let rounds = (2 * active).max(WAITING_BATCHES_TO_SHRINK);
        !self.takers_waited && self.waiting > rounds * self.batch
    }

    /// Whether the workers are, or are about to be, short of messages: a taker waited, or
    /// fewer than [`WAITING_BATCHES_TO_GROW`] batches wait.
    pub(super) fn short(self) -> bool {
        self.takers_waited || self.waiting < WAITING_BATCHES_TO_GROW * self.batch
    }
}
