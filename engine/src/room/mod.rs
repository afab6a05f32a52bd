//! What one queue's consumer may hold at once: the messages received and not yet settled, their
//! bytes, and those of them waiting to be handed out (the prefetch). The receivers take room
//! before and after each receive; a delivery gives its message's back when it is settled and
//! SQS answered. The decisions are a pure state (`state.rs`); `held.rs` shares it between the
//! receivers and the deliveries, and wakes whom it lets through.

pub(crate) mod held;
pub(crate) mod state;
