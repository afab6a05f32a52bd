//! The dispatch of deliveries to the handlers: one message per handler call, or a receive's
//! messages together, until shutdown.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, error, warn};

use crate::handle::handler::{BatchHandler, Handler, HandlerResult};
use crate::handle::message_span::{batch_span, message_span};
use crate::handle::outcome::{BatchOutcome, Outcome};
use crate::limits::MAX_BATCH_ENTRIES;
use crate::receive::consumer::Consumer;
use crate::receive::delivery::Delivery;
use crate::receive::queue::QueueRuntime;
use crate::worker_pool::{WorkerPermit, WorkerSource};

/// Hands the deliveries to the handlers until `shutdown` completes, then shuts the consumer
/// down: the receivers stop, what was not started goes back, running handlers get
/// `shutdown_timeout`, and every settlement is sent.
pub(super) async fn dispatch_until_shutdown<S: Handler, B: BatchHandler>(
    mut consumer: Consumer,
    dispatch: Dispatch<S, B>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    source: WorkerSource,
    shutdown_timeout: Duration,
) {
    let control = consumer.handle();
    let per_handler = match &dispatch {
        Dispatch::Single(_) => 1,
        Dispatch::Batch(_) => MAX_BATCH_ENTRIES,
    };
    let runtime = Arc::clone(consumer.runtime());
    runtime.capacity.set_workers(source.workers(), per_handler);

    let stop = CancellationToken::new();
    let watcher = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                biased;
                () = shutdown => stop.cancel(),
                () = stop.cancelled() => {}
            }
        })
    };

    let tasks = TaskTracker::new();
    let abort = CancellationToken::new();
    let mut returned = Vec::new();
    'receive: loop {
        if source.is_shared() && !consumer.has_ready() {
            // About to wait for a receive: a shared pool's workers go to the other engines
            // meanwhile.
            source.idle();
        }
        match &dispatch {
            Dispatch::Single(handler) => {
                let Some(Some(delivery)) = unless_stopped(&stop, consumer.recv()).await else {
                    break 'receive;
                };
                let waiting = runtime.capacity.wait_for_worker(1);
                let Some(permit) = unless_stopped(&stop, source.acquire()).await else {
                    returned.push(delivery);
                    break 'receive;
                };
                drop(waiting);
                // With the heartbeat off, its visibility may have lapsed while it waited for
                // the worker: SQS hands it out again.
                let Some(delivery) = delivery.unless_lapsed(Instant::now()) else {
                    continue;
                };
                // The rest of the same receive batch that can start now (a free worker
                // each) starts with it, on one task: its handlers still run concurrently
                // and settle each on its own, but the batch stays on one thread and costs
                // one spawn instead of one per message.
                let mut group = Vec::with_capacity(GROUP_MAX);
                group.push((delivery, permit));
                while group.len() < GROUP_MAX {
                    let Some(permit) = source.try_acquire() else {
                        break;
                    };
                    let Some(delivery) = consumer.try_recv_buffered() else {
                        break;
                    };
                    group.push((delivery, permit));
                }
                let abort = abort.clone();
                let handles: Vec<_> = group
                    .into_iter()
                    .map(|(delivery, permit)| handle_one(Arc::clone(handler), delivery, permit))
                    .collect();
                tasks.spawn(async move {
                    tokio::select! {
                        biased;
                        () = JoinAll::new(handles) => {}
                        () = abort.cancelled() => {}
                    }
                });
            }
            Dispatch::Batch(handler) => {
                let Some(Some(batch)) =
                    unless_stopped(&stop, consumer.recv_batch(MAX_BATCH_ENTRIES)).await
                else {
                    break 'receive;
                };
                let waiting = runtime.capacity.wait_for_worker(batch.len());
                let Some(permit) = unless_stopped(&stop, source.acquire()).await else {
                    returned.extend(batch);
                    break 'receive;
                };
                drop(waiting);
                let now = Instant::now();
                let batch: Vec<Delivery> = batch
                    .into_iter()
                    .filter_map(|delivery| delivery.unless_lapsed(now))
                    .collect();
                let Some(queue) = batch.first().map(|d| Arc::clone(d.queue())) else {
                    continue;
                };
                let handler = Arc::clone(handler);
                let abort = abort.clone();
                let span = batch_span(&queue.name, batch.iter().map(Delivery::message));
                tasks.spawn(
                    async move {
                        let _permit = permit;
                        let (messages, tickets): (Vec<_>, Vec<_>) =
                            batch.into_iter().map(Delivery::into_parts).unzip();
                        let timer = HandlerTimer::start(&queue);
                        let outcome = tokio::select! {
                            biased;
                            outcome = queue.processing.within(handler.handle(messages)) => outcome,
                            () = abort.cancelled() => return,
                        };
                        drop(timer);
                        let outcome = outcome.unwrap_or_else(|| {
                            BatchOutcome::Each(
                                tickets
                                    .iter()
                                    .map(|ticket| timed_out(&queue, ticket.receive_count()))
                                    .collect(),
                            )
                        });
                        settle_batch(&queue, tickets, outcome);
                    }
                    .instrument(span),
                );
            }
        }
    }

    // Shutdown: no more receives; what was received but not started goes back at once.
    source.idle();
    stop.cancel();
    let _ = watcher.await;
    // Handed out but not started: they no longer count as prefetched, and go back too.
    for delivery in returned {
        delivery.settle_detached(Outcome::Retry);
    }
    consumer.close().await;
    tasks.close();
    if tokio::time::timeout(shutdown_timeout, tasks.wait())
        .await
        .is_err()
    {
        warn!(queue = control.queue(), timeout = ?shutdown_timeout, "handlers still running at the shutdown timeout; dropping them unsettled");
        abort.cancel();
        tasks.wait().await;
    }
    // Every handler is done: no delivery is left to keep invisible.
    control.shutdown().await;
    drop(consumer);
}

/// `future`'s output, or `None` once `stop` is cancelled (looked at first). `future` must be
/// cancel safe: it is dropped when `stop` wins.
async fn unless_stopped<T>(stop: &CancellationToken, future: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        value = future => Some(value),
    }
}

/// The most deliveries of one receive batch started on one task.
const GROUP_MAX: usize = 10;

/// One message through the handler and on to its settlement, holding a worker until done.
pub(crate) fn handle_one<H: Handler>(
    handler: Arc<H>,
    delivery: Delivery,
    permit: WorkerPermit,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    let queue = Arc::clone(delivery.queue());
    let span = message_span(&queue.name, delivery.message());
    Box::pin(
        async move {
            let _permit = permit;
            let (message, ticket) = delivery.into_parts();
            let timer = HandlerTimer::start(&queue);
            let outcome = match queue.processing.within(handler.handle(message)).await {
                Some(result) => match result.into_outcome() {
                    Ok(outcome) => outcome,
                    Err(error) => {
                        let outcome = queue.on_handler_error.outcome(ticket.receive_count());
                        warn!(error = %error, outcome = outcome.as_str(), delay = ?delay_of(outcome), "handler failed; settling by the error policy");
                        outcome
                    }
                },
                None => timed_out(&queue, ticket.receive_count()),
            };
            drop(timer);
            // Queued now; the answer is recorded and logged by the flusher.
            ticket.settle_detached(outcome);
        }
        .instrument(span),
    )
}

/// The outcome of a message whose handler was cancelled at `max_processing_time`, by the
/// queue's `on_processing_timeout` policy; logged on the message's span.
fn timed_out(queue: &QueueRuntime, receive_count: u32) -> Outcome {
    let outcome = queue.processing.on_timeout.outcome(receive_count);
    warn!(
        limit = ?queue.processing.max_processing_time,
        outcome = outcome.as_str(),
        delay = ?delay_of(outcome),
        "handler ran past max_processing_time: cancelled; settling by on_processing_timeout"
    );
    outcome
}

/// The delay an outcome asks for, for the logs.
fn delay_of(outcome: Outcome) -> Option<Duration> {
    match outcome {
        Outcome::RetryAfter(delay) => Some(delay),
        _ => None,
    }
}

/// Runs handler futures concurrently until all are done. A future that panics is dropped
/// (its message left unsettled, as a panicking handler on a task of its own would leave it)
/// and the others go on.
pub(crate) struct JoinAll {
    futures: Vec<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>,
    left: usize,
}

impl JoinAll {
    pub(crate) fn new(futures: Vec<Pin<Box<dyn Future<Output = ()> + Send>>>) -> Self {
        let left = futures.len();
        Self {
            futures: futures.into_iter().map(Some).collect(),
            left,
        }
    }
}

impl Future for JoinAll {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        for slot in &mut this.futures {
            let Some(future) = slot else {
                continue;
            };
            let polled = std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)));
            match polled {
                Ok(Poll::Pending) => {}
                Ok(Poll::Ready(())) | Err(_) => {
                    *slot = None;
                    this.left -= 1;
                }
            }
        }
        if this.left == 0 {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Times a handler invocation and counts it as running until dropped.
struct HandlerTimer<'a> {
    queue: &'a QueueRuntime,
    started: tokio::time::Instant,
}

impl<'a> HandlerTimer<'a> {
    fn start(queue: &'a QueueRuntime) -> Self {
        queue.metrics.handler_started();
        Self {
            queue,
            started: tokio::time::Instant::now(),
        }
    }
}

impl Drop for HandlerTimer<'_> {
    fn drop(&mut self) {
        let took = self.started.elapsed();
        self.queue.metrics.handler_ended(took.as_secs_f64());
        self.queue.capacity.handled(took);
    }
}

/// Settles the messages of a batch with the batch handler's answer.
fn settle_batch(
    queue: &QueueRuntime,
    tickets: Vec<crate::receive::delivery::Ticket>,
    outcome: BatchOutcome,
) {
    let outcomes = match outcome {
        BatchOutcome::All(outcome) => vec![outcome; tickets.len()],
        BatchOutcome::Each(outcomes) => {
            if outcomes.len() != tickets.len() {
                error!(
                    queue = %queue.name,
                    messages = tickets.len(),
                    outcomes = outcomes.len(),
                    "batch handler returned a different number of outcomes than messages; the messages without one are left unsettled"
                );
            }
            outcomes
        }
    };
    if queue.fifo {
        check_group_order(queue, &tickets, &outcomes);
    }
    for (ticket, outcome) in tickets.into_iter().zip(outcomes) {
        ticket.settle_detached(outcome);
    }
}

/// A batch handler owns the order of a FIFO receive: warns (once per queue) when it answered a
/// message of a group with anything but a delete and a later message of the same group with a
/// delete, which hands the later one's successors out before the earlier one comes back.
fn check_group_order(
    queue: &QueueRuntime,
    tickets: &[crate::receive::delivery::Ticket],
    outcomes: &[Outcome],
) {
    let mut stopped: Vec<&str> = Vec::new();
    for (ticket, outcome) in tickets.iter().zip(outcomes) {
        let Some(group) = ticket.group() else {
            continue;
        };
        let deletes = matches!(outcome, Outcome::Ack | Outcome::Drop);
        if !deletes {
            stopped.push(group);
        } else if stopped.contains(&&**group) {
            if !queue
                .warned_batch_order
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                warn!(
                    queue = %queue.name,
                    group = %group,
                    message_id = ticket.message_id(),
                    "a batch handler deleted a FIFO message after not deleting an earlier one of its group: the group's order is broken (answer the rest of the group like the earlier one to keep it); warned once per queue"
                );
            }
            return;
        }
    }
}

pub(super) enum Dispatch<S, B> {
    Single(Arc<S>),
    Batch(Arc<B>),
}

/// Stands in for the handler kind a run does not use; never called.
pub(super) struct NoHandler;

impl Handler for NoHandler {
    type Output = Outcome;

    async fn handle(&self, _message: crate::handle::message::Message) -> Outcome {
        Outcome::Retry
    }
}

impl BatchHandler for NoHandler {
    async fn handle(&self, _messages: Vec<crate::handle::message::Message>) -> BatchOutcome {
        BatchOutcome::All(Outcome::Retry)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A handler future that yields once (so the others run meanwhile), then counts itself
    /// done, or panics.
    fn step(done: &Arc<AtomicUsize>, panics: bool) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let done = Arc::clone(done);
        Box::pin(async move {
            tokio::task::yield_now().await;
            assert!(!panics, "this handler panics");
            done.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[tokio::test]
    async fn the_handlers_of_a_group_all_finish_though_one_of_them_panics() {
        let done = Arc::new(AtomicUsize::new(0));
        let group = vec![
            step(&done, false),
            step(&done, true),
            step(&done, false),
            step(&done, false),
        ];
        tokio::time::timeout(Duration::from_secs(5), tokio::spawn(JoinAll::new(group)))
            .await
            .expect("the group finishes")
            .expect("the group's task survives a panicking handler");
        assert_eq!(done.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_group_is_done_at_once() {
        tokio::time::timeout(Duration::from_secs(1), JoinAll::new(Vec::new()))
            .await
            .expect("an empty group is ready when first polled");
    }
}
