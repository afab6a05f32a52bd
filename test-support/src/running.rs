//! An engine on LocalStack, run in the background until stopped, and waiting for what it does.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqs_engine::{BatchHandler, Engine, EngineBuilder, Error, Handler, Message, Outcome, Stats};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::localstack::sdk_config;

/// An engine builder on LocalStack for `queue`, with a short long poll so tests stop quickly.
pub async fn builder(queue: &str) -> EngineBuilder {
    Engine::builder()
        .sdk_config(&sdk_config().await)
        .queue(queue)
        .wait_time(Duration::from_secs(1))
}

/// An engine run in the background, stopped by `stop`.
#[derive(Debug)]
pub struct Running {
    /// Cancelling it starts the engine's shutdown.
    pub stop: CancellationToken,
    /// The engine's run: its statistics when it stopped, or its error.
    pub task: JoinHandle<Result<Stats, Error>>,
}

impl Running {
    /// Stops the engine and waits for it; returns its statistics.
    ///
    /// # Panics
    ///
    /// When the engine takes more than 60 s to stop, panics or fails.
    pub async fn shutdown(self) -> Stats {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("the engine stops within 60 s")
            .expect("the engine task does not panic")
            .expect("the engine runs without error")
    }
}

/// Runs `engine` with `handler` in the background.
pub fn spawn_engine<H: Handler>(engine: Engine, handler: H) -> Running {
    let stop = CancellationToken::new();
    let shutdown = stop.clone().cancelled_owned();
    let task = tokio::spawn(engine.run(handler, shutdown));
    Running { stop, task }
}

/// Runs `engine` with the batch handler `handler` in the background.
pub fn spawn_batch_engine<H: BatchHandler>(engine: Engine, handler: H) -> Running {
    let stop = CancellationToken::new();
    let shutdown = stop.clone().cancelled_owned();
    let task = tokio::spawn(engine.run_batches(handler, shutdown));
    Running { stop, task }
}

/// A handler that acknowledges every message, counting each in `handled` as it starts.
pub fn counting_acks(
    handled: &Arc<AtomicUsize>,
) -> impl Fn(Message) -> std::future::Ready<Outcome> + Send + Sync + 'static {
    let handled = Arc::clone(handled);
    move |_message: Message| {
        handled.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Outcome::Ack)
    }
}

/// Runs `engine`, acknowledging every message, until the handler of the `messages`th asks it to
/// stop as it returns; returns the engine's statistics once it stopped, and the messages
/// handled.
///
/// # Panics
///
/// When the engine has not stopped within `limit`, or fails.
pub async fn ack_until_handled(engine: Engine, messages: usize, limit: Duration) -> (Stats, usize) {
    let stop = CancellationToken::new();
    let handled = Arc::new(AtomicUsize::new(0));
    let handler_handled = Arc::clone(&handled);
    let handler_stop = stop.clone();
    let run = engine.run(
        move |_message: Message| {
            let handled = Arc::clone(&handler_handled);
            let stop = handler_stop.clone();
            async move {
                if handled.fetch_add(1, Ordering::SeqCst) + 1 == messages {
                    stop.cancel();
                }
                Outcome::Ack
            }
        },
        stop.clone().cancelled_owned(),
    );
    let stats = tokio::time::timeout(limit, run)
        .await
        .unwrap_or_else(|_| {
            panic!("{messages} messages handled and the engine stopped within {limit:?}")
        })
        .expect("the engine runs");
    (stats, handled.load(Ordering::SeqCst))
}

/// Waits until `check` holds, polling every 20 ms, for at most `limit`.
///
/// # Panics
///
/// When `limit` passes first, saying `what` it waited for.
pub async fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
