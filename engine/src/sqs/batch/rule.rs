//! [`Rule`]: what may share a batch call, the part of batching that differs from one kind of
//! call to another.

/// Whether an entry joins the batch being taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// It joins the batch.
    Take,
    /// It waits for a later batch; the entries behind it may still join.
    Skip,
    /// It waits for a later batch, and so does every entry behind it.
    #[cfg_attr(
        not(feature = "ruststream"),
        allow(
            dead_code,
            reason = "only the broker's byte budget stops a batch short"
        )
    )]
    Stop,
}

/// What may share a batch call of a [`Batcher`](super::Batcher), and what a call in flight
/// holds back. The batcher calls it with each entry that comes, leaves, or goes out; every
/// method but [`admits`](Rule::admits) has a default for a rule that keeps no account.
pub(crate) trait Rule<E> {
    /// Whether `entry` may join `batch`, the entries taken so far for the next call.
    fn admits(&self, batch: &[E], entry: &E) -> Admit;

    /// Whether `entry` may go out now: not held back by a call in flight.
    fn ready(&self, _entry: &E) -> bool {
        true
    }

    /// Whether the waiting entries fill a call before they number a full batch.
    fn is_full(&self) -> bool {
        false
    }

    /// `entry` joined the waiting entries.
    fn pushed(&mut self, _entry: &E) {}

    /// `entry` left the waiting entries: into a batch, or taken out.
    fn left(&mut self, _entry: &E) {}

    /// `batch` went out in a call.
    fn sent(&mut self, _batch: &[E]) {}
}
