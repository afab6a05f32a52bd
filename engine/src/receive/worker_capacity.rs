//! How fast the engine's workers could take messages if receiving kept up: the demand the
//! receivers grow toward while the workers wait for messages.
//!
//! The rate the workers take messages at ([`TakeRate`](crate::receive::take_rate::TakeRate)) is what
//! the receivers bring while the workers wait: it only doubles a round trip as the receivers
//! grow. What the workers could take is their number over how long a handler takes, which is
//! known from the first handlers on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::sqs::round_trip::RoundTrip;

/// The workers of a queue whose handlers the engine runs ([`Engine::run`] and
/// [`Engine::run_batches`]), and how long their handlers take.
///
/// [`Engine::run`]: crate::Engine::run
/// [`Engine::run_batches`]: crate::Engine::run_batches
#[derive(Debug, Default)]
pub(crate) struct WorkerCapacity {
    /// Messages the handlers at once take: the workers, times the messages of a batch for a
    /// batch handler; 0 until set.
    messages_at_once: AtomicUsize,
    /// How long a handler takes, smoothed as a round trip is.
    handling: RoundTrip,
    /// Messages taken for the handlers and waiting for a free worker (see
    /// [`WaitingForWorker`]).
    waiting_for_worker: AtomicUsize,
    /// Whether the receivers bound the messages waiting by what the workers start (with the
    /// heartbeat off): only then is [`moved`](Self::moved) told anything.
    bounds_waiting: bool,
    /// Told whenever a handler ends or messages stop waiting for a worker: what the receivers
    /// bound the waiting messages by with the heartbeat off may have moved.
    moved: Notify,
}

impl WorkerCapacity {
    /// No workers set yet; `bounds_waiting` when the receivers bound the messages waiting by
    /// it (see [`lapse_bound`](crate::receive::lapse_bound)).
    pub(crate) fn new(bounds_waiting: bool) -> Self {
        Self {
            bounds_waiting,
            ..Self::default()
        }
    }

    /// The engine runs up to `workers` handlers at once, each of up to `per_handler`
    /// messages.
    pub(crate) fn set_workers(&self, workers: usize, per_handler: usize) {
        self.messages_at_once
            .store(workers.saturating_mul(per_handler), Ordering::Relaxed);
    }

    /// A handler (of one message, or of a receive's messages together) took `took`.
    pub(crate) fn handled(&self, took: Duration) {
        self.handling.sample(took);
        self.moved();
    }

    /// Told whenever a handler ends or messages stop waiting for a worker (and whenever
    /// [`moved`](Self::moved) is called).
    pub(crate) fn on_move(&self) -> &Notify {
        &self.moved
    }

    /// Something the waiting messages are bounded by moved: messages left the prefetch.
    pub(crate) fn moved(&self) {
        if self.bounds_waiting {
            self.moved.notify_waiters();
        }
    }

    /// `messages` taken for the handlers wait for a free worker until the guard is dropped.
    pub(crate) fn wait_for_worker(&self, messages: usize) -> WaitingForWorker<'_> {
        self.waiting_for_worker
            .fetch_add(messages, Ordering::Relaxed);
        WaitingForWorker(self, messages)
    }

    /// Messages taken for the handlers that wait for a free worker now.
    pub(crate) fn waiting_for_worker(&self) -> usize {
        self.waiting_for_worker.load(Ordering::Relaxed)
    }

    /// Messages a second the workers could take; `None` until the workers are set and a
    /// handler has ended (never, where the caller handles the deliveries itself: a
    /// [`Consumer`](crate::Consumer)'s).
    pub(crate) fn per_second(&self) -> Option<f64> {
        let at_once = self.messages_at_once.load(Ordering::Relaxed);
        let handling = self.handling.get()?;
        (at_once > 0).then(|| at_once as f64 / handling.as_secs_f64())
    }
}

/// Messages taken for the handlers that wait for a free worker: counted in
/// [`WorkerCapacity::waiting_for_worker`] until dropped.
#[derive(Debug)]
pub(crate) struct WaitingForWorker<'a>(&'a WorkerCapacity, usize);

impl Drop for WaitingForWorker<'_> {
    fn drop(&mut self) {
        self.0
            .waiting_for_worker
            .fetch_sub(self.1, Ordering::Relaxed);
        self.0.moved();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_the_workers_over_a_handlers_time() {
        let capacity = WorkerCapacity::default();
        capacity.set_workers(64, 1);
        assert_eq!(capacity.per_second(), None, "nothing handled yet");
        capacity.handled(Duration::from_millis(20));
        assert_eq!(capacity.per_second(), Some(3_200.0));
        capacity.set_workers(64, 10);
        assert_eq!(capacity.per_second(), Some(32_000.0), "a batch per handler");
        let consumers = WorkerCapacity::default();
        consumers.handled(Duration::from_millis(20));
        assert_eq!(consumers.per_second(), None, "workers never set");
    }

    #[test]
    fn messages_wait_for_a_worker_while_their_guard_lives() {
        let capacity = WorkerCapacity::default();
        let one = capacity.wait_for_worker(1);
        let batch = capacity.wait_for_worker(10);
        assert_eq!(capacity.waiting_for_worker(), 11);
        drop(one);
        assert_eq!(capacity.waiting_for_worker(), 10);
        drop(batch);
        assert_eq!(capacity.waiting_for_worker(), 0);
    }
}
