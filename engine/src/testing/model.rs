//! The in-memory SQS model: the rules SQS holds a call to, the messages of a queue and where
//! each stands, and the deduplication of FIFO sends. The in-process SQS of this crate and the
//! load test's embedded SQS server are fronts of it; each maps a [`ModelError`] to its own
//! answer.
//!
//! Deadlines (visibility, delay, the deduplication window) are on tokio's clock, so that a
//! test on a paused clock moves them; times a client sees are wall-clock and the front's.

mod dedup;
mod error;
mod messages;
mod redrive;
pub mod rules;
mod seq_map;
#[cfg(test)]
mod tests;
mod views;

pub use dedup::Deduplication;
pub use error::{ErrorKind, ModelError};
pub use messages::Messages;
pub use redrive::RedrivePolicy;
pub use views::{Counts, Message, Received, Redriven, Standing};
