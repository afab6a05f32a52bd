//! What the engine calls for each message, or for each received batch.

use std::future::Future;

use crate::message::Message;
use crate::outcome::{BatchOutcome, Outcome};

/// Handles one message at a time.
///
/// Any `Fn(Message) -> impl Future<Output = Outcome>` that is `Send + Sync + 'static` is a
/// handler. The engine runs up to `workers` handlers at once, concurrently: the messages of one
/// receive batch that start together share a task, each handler its own future, and each
/// message is settled as soon as its own handler returns, so one slow message never holds up
/// the others of its receive batch. A handler that blocks its thread (synchronous I/O, long
/// computation) does hold up the others of its task: run such work with
/// `tokio::task::spawn_blocking`.
///
/// A handler that panics, or whose future the engine drops at the end of the shutdown timeout,
/// leaves its message unsettled: no call is made, and the message comes back when its
/// visibility timeout lapses.
pub trait Handler: Send + Sync + 'static {
    /// Processes `message` and says how to settle it.
    fn handle(&self, message: Message) -> impl Future<Output = Outcome> + Send;
}

impl<F, Fut> Handler for F
where
    F: Fn(Message) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send,
{
    fn handle(&self, message: Message) -> impl Future<Output = Outcome> + Send {
        self(message)
    }
}

/// Handles the messages of one receive call together (up to ten).
///
/// Any `Fn(Vec<Message>) -> impl Future<Output = BatchOutcome>` that is `Send + Sync + 'static`
/// is a batch handler. Return [`BatchOutcome::All`] to settle every message alike, or
/// [`BatchOutcome::Each`] with one outcome per message, in order.
pub trait BatchHandler: Send + Sync + 'static {
    /// Processes `messages` and says how to settle them.
    fn handle(&self, messages: Vec<Message>) -> impl Future<Output = BatchOutcome> + Send;
}

impl<F, Fut> BatchHandler for F
where
    F: Fn(Vec<Message>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = BatchOutcome> + Send,
{
    fn handle(&self, messages: Vec<Message>) -> impl Future<Output = BatchOutcome> + Send {
        self(messages)
    }
}
