//! How fast the engine's workers could take messages if receiving kept up: the demand the
//! receivers grow toward while the workers wait for messages.
//!
//! The rate the workers take messages at ([`TakeRate`](crate::receive::take_rate::TakeRate)) is what
//! the receivers bring while the workers wait: it only doubles a round trip as the receivers
//! grow. What the workers could take is their number over how long a handler takes, which is
//! known from the first handlers on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

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
}

impl WorkerCapacity {
    /// The engine runs up to `workers` handlers at once, each of up to `per_handler`
    /// messages.
    pub(crate) fn set_workers(&self, workers: usize, per_handler: usize) {
        self.messages_at_once
            .store(workers.saturating_mul(per_handler), Ordering::Relaxed);
    }

    /// A handler (of one message, or of a receive's messages together) took `took`.
    pub(crate) fn handled(&self, took: Duration) {
        self.handling.sample(took);
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
}
