//! What the engine calls for each message, or for each received batch.

use std::future::Future;

use crate::handle::message::Message;
use crate::handle::outcome::{BatchOutcome, Outcome};

/// What a handler may return: an [`Outcome`], or a `Result` so that the handler can use `?`.
///
/// `Ok(outcome)` settles with `outcome`, and `Ok(())` acknowledges. An `Err` settles by the
/// engine's error policy ([`EngineBuilder::on_handler_error`](crate::EngineBuilder::on_handler_error),
/// default a [`RetryAfter`](Outcome::RetryAfter) that doubles with the receive count, from 1 s
/// to 15 minutes), with the error logged on the message's span.
pub trait HandlerResult: Send {
    /// The outcome, or the error the handler failed with.
    ///
    /// # Errors
    ///
    /// The handler's own error, to be settled by the engine's error policy.
    fn into_outcome(self) -> Result<Outcome, Box<dyn std::error::Error + Send + Sync>>;
}

impl HandlerResult for Outcome {
    fn into_outcome(self) -> Result<Outcome, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self)
    }
}

impl<E: Into<Box<dyn std::error::Error + Send + Sync>> + Send> HandlerResult
    for Result<Outcome, E>
{
    fn into_outcome(self) -> Result<Outcome, Box<dyn std::error::Error + Send + Sync>> {
        self.map_err(Into::into)
    }
}

impl<E: Into<Box<dyn std::error::Error + Send + Sync>> + Send> HandlerResult for Result<(), E> {
    fn into_outcome(self) -> Result<Outcome, Box<dyn std::error::Error + Send + Sync>> {
        self.map(|()| Outcome::Ack).map_err(Into::into)
    }
}

/// Handles one message at a time.
///
/// Any `Fn(Message) -> impl Future<Output = R>` that is `Send + Sync + 'static` is a handler,
/// where `R` is an [`Outcome`], a `Result<Outcome, E>` or a `Result<(), E>` (see
/// [`HandlerResult`]). The engine runs up to `workers` handlers at once, concurrently: the messages of one
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
    /// What [`handle`](Self::handle) returns: an [`Outcome`] or a `Result`.
    type Output: HandlerResult;

    /// Processes `message` and says how to settle it.
    fn handle(&self, message: Message) -> impl Future<Output = Self::Output> + Send;
}

impl<F, Fut> Handler for F
where
    F: Fn(Message) -> Fut + Send + Sync + 'static,
    Fut: Future + Send,
    Fut::Output: HandlerResult,
{
    type Output = Fut::Output;

    fn handle(&self, message: Message) -> impl Future<Output = Fut::Output> + Send {
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

// On the in-process SQS (a test double on tokio's clock): how a handler's `Err` is settled.
// The span a handler runs in is checked in `tests/message_span.rs`.
#[cfg(all(test, feature = "testing"))]
mod tests {
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::testing::InProcessSqs;
    use crate::{Engine, Stats};

    /// Runs an engine whose handler fails on the first delivery and succeeds on the second,
    /// until one message is settled for good; returns the counts.
    async fn fail_once_then_succeed(on_error: Option<Outcome>) -> (InProcessSqs, Stats) {
        let sqs = InProcessSqs::new();
        sqs.send("orders", "one").expect("sent");
        let mut builder = Engine::builder().api(sqs.clone()).queue("orders");
        if let Some(outcome) = on_error {
            builder = builder.on_handler_error(outcome);
        }
        let done = CancellationToken::new();
        let handler_done = done.clone();
        let stats = builder
            .build()
            .expect("engine")
            .run(
                move |message: Message| {
                    let done = handler_done.clone();
                    async move {
                        if message.receive_count() == 1 {
                            if on_error.is_some() {
                                // The policy settles it: nothing comes back.
                                tokio::time::sleep(Duration::from_millis(1)).await;
                                done.cancel();
                            }
                            return Err(std::io::Error::other("the database is away"));
                        }
                        done.cancel();
                        Ok(())
                    }
                },
                done.clone().cancelled_owned(),
            )
            .await
            .expect("runs");
        (sqs, stats)
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_is_retried_by_default_and_ok_acknowledges() {
        let (sqs, stats) = fail_once_then_succeed(None).await;
        assert_eq!(
            stats.retried_after.ok, 1,
            "the error returned the message after a delay"
        );
        assert_eq!(stats.acked.ok, 1, "Ok(()) acknowledged it");
        assert_eq!(
            sqs.counts("orders").visible + sqs.counts("orders").in_flight,
            0
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_error_policy_is_a_setting() {
        let (sqs, stats) = fail_once_then_succeed(Some(Outcome::Drop)).await;
        assert_eq!(stats.dropped.ok, 1, "the error dropped the message");
        assert_eq!(stats.retried.ok, 0);
        assert_eq!(
            sqs.counts("orders").visible + sqs.counts("orders").in_flight,
            0
        );
    }

    /// When each handler run of a message that always fails began, over `run_for` or until
    /// the 100th run, with `builder` (its queue and API set here).
    async fn runs_of_a_failing_handler(
        builder: crate::EngineBuilder,
        run_for: Duration,
    ) -> Vec<Duration> {
        let sqs = InProcessSqs::new();
        sqs.send("orders", "poison").expect("sent");
        let start = tokio::time::Instant::now();
        let runs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = std::sync::Arc::clone(&runs);
        let enough = CancellationToken::new();
        let stop = enough.clone();
        builder
            .api(sqs.clone())
            .queue("orders")
            .build()
            .expect("engine")
            .run(
                move |_message: Message| {
                    let seen = std::sync::Arc::clone(&seen);
                    let enough = enough.clone();
                    async move {
                        let mut seen = seen.lock().expect("runs");
                        seen.push(start.elapsed());
                        if seen.len() >= 100 {
                            enough.cancel();
                        }
                        Err::<(), _>(std::io::Error::other("the record cannot be parsed"))
                    }
                },
                async move {
                    tokio::select! {
                        () = tokio::time::sleep(run_for) => {}
                        () = stop.cancelled() => {}
                    }
                },
            )
            .await
            .expect("runs");
        runs.lock().expect("runs").clone()
    }

    // On a paused clock, so that ten seconds of redeliveries take no time.
    #[tokio::test(start_paused = true)]
    async fn a_message_whose_handler_always_fails_comes_back_later_each_time_by_default() {
        let runs = runs_of_a_failing_handler(Engine::builder(), Duration::from_secs(10)).await;
        assert!(
            (3..=6).contains(&runs.len()),
            "a handful of runs in 10 s, not a loop: {} runs, {runs:?}",
            runs.len()
        );
        let gaps: Vec<Duration> = runs.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[0] >= Duration::from_secs(1), "{gaps:?}");
        for pair in gaps.windows(2) {
            assert!(
                pair[1].as_secs_f64() >= 1.4 * pair[0].as_secs_f64(),
                "the delay grows with the receive count: {gaps:?}"
            );
        }
    }
}
