//! Access to the engine's internal state machines for the benches in `benches/`. Not part of
//! the API: hidden, behind the `bench` feature, and free to change in any release.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::Semaphore;

use crate::api::ReceivedMessage;
use crate::handle::handler::Handler;
use crate::handle::outcome::Outcome;
use crate::metrics::{QueueMetrics, StatsCells};
use crate::receive::delivery::Delivery;
use crate::receive::queue::{OpenOptions, QueueRuntime};
use crate::settle::coalescer::{Coalescer, CoalescerConfig, Entry};
use crate::settle::heartbeat::{HeartbeatConfig, Schedule};
use crate::sqs::backoff::Backoff;
use crate::sqs::batch::FlushReason;
use crate::sqs::lane::Lane;
use crate::stand_in::StandIn;

/// The settlement coalescer, with `u64` tokens.
#[derive(Debug)]
pub struct CoalescerBench(Coalescer<u64>);

impl CoalescerBench {
    /// A coalescer with full batches of ten, `max_wait` and `max_in_flight` calls per lane.
    pub fn new(max_wait: Duration, max_in_flight: usize) -> Self {
        Self(Coalescer::new(CoalescerConfig {
            max_batch: 10,
            max_wait,
            max_in_flight,
        }))
    }

    /// Pushes a delete (or, with `visibility`, a visibility change) for `receipt`.
    pub fn push(&mut self, receipt: Arc<str>, visibility: bool, now: Instant, token: u64) -> bool {
        let lane = if visibility {
            Lane::Visibility
        } else {
            Lane::Delete
        };
        self.0.push(
            lane,
            Entry {
                receipt,
                visibility: None,
                enqueued_at: now,
                token,
            },
        )
    }

    /// Takes every batch due at `now`, finishes its call at once, and returns the entries
    /// taken.
    pub fn flush(&mut self, now: Instant) -> usize {
        let mut taken = 0;
        while let Some(batch) = self.0.poll_batch(now) {
            taken += batch.entries.len();
            self.0
                .finish(batch.lane, batch.entries.iter().map(|e| &e.receipt));
        }
        taken
    }
}

/// The heartbeat schedule.
#[derive(Debug)]
pub struct ScheduleBench(Schedule);

impl ScheduleBench {
    /// A schedule for a visibility timeout.
    pub fn new(visibility: Duration) -> Self {
        Self(Schedule::new(
            HeartbeatConfig::for_visibility(visibility, None)
                .unwrap_or_else(|| panic!("a visibility of at least 2 s: {visibility:?}")),
        ))
    }

    /// Tracks a delivery received at `received`; returns its key.
    pub fn register(&mut self, receipt: Arc<str>, received: Instant, visibility: Duration) -> u64 {
        self.0
            .register(
                Arc::clone(&receipt),
                receipt,
                received + visibility,
                received + crate::MAX_VISIBILITY,
            )
            .0
    }

    /// Stops tracking a delivery.
    pub fn deregister(&mut self, key: u64) {
        self.0.deregister(key);
    }

    /// Takes the extensions due at `now` and applies each at once; returns how many.
    pub fn extend_due(&mut self, now: Instant, seconds: u32) -> usize {
        let due = self.0.poll_due(now);
        for extension in &due {
            self.0.extended(extension.key, now, seconds, false);
        }
        due.len()
    }
}

/// The per-message metrics path of one queue.
pub struct MetricsBench(QueueMetrics);

impl std::fmt::Debug for MetricsBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsBench")
    }
}

impl MetricsBench {
    /// Registers a queue's handles with the recorder installed now (if any).
    pub fn new(queue: &str) -> Self {
        Self(QueueMetrics::new(queue, Arc::new(StatsCells::default())))
    }

    /// Everything the engine records for one acked message, a tenth of its receive and of its
    /// delete batch included.
    pub fn one_message(&self, index: u64) {
        let m = &self.0;
        if index.is_multiple_of(10) {
            m.call(crate::metrics::Action::ReceiveMessage, true);
            m.received(10);
            m.prefetched(10.0);
        }
        m.delivered(1, false);
        m.in_flight(1.0);
        m.prefetched(-1.0);
        m.handler_started();
        m.handler_ended(0.001);
        m.in_flight(-1.0);
        m.settled(&Outcome::Ack, true, Lane::Delete, 0.002);
        if index % 10 == 9 {
            m.flushed(Lane::Delete, FlushReason::Full, 10);
            m.call(crate::metrics::Action::DeleteMessageBatch, true);
        }
    }
}

/// The engine's path from a received batch to its handlers, in process: each message made a
/// delivery (heartbeat registration and metrics included), the batch started as
/// [`Engine::run`](crate::Engine::run) starts it (one task for the receive batch, a worker
/// permit per message), each handler invoked, and its outcome settled into the coalescer.
/// No receiver, flusher or network: the settlement batches are taken as due and finished at
/// once.
pub struct DispatchBench {
    queue: Arc<QueueRuntime>,
    workers: Arc<Semaphore>,
}

impl std::fmt::Debug for DispatchBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DispatchBench")
    }
}

impl DispatchBench {
    /// Opens a queue on a stand-in for SQS, with a 30 s visibility timeout and the heartbeat
    /// on or off. Needs a tokio runtime.
    ///
    /// # Panics
    ///
    /// When the stand-in queue cannot be opened (it always can).
    pub async fn new(heartbeat: bool) -> Self {
        let (queue, _) = QueueRuntime::open(
            StandIn::answering(),
            OpenOptions {
                queue: "bench".into(),
                visibility_timeout: Some(30),
                backoff: Backoff::default(),
                coalescer: CoalescerConfig {
                    max_batch: 10,
                    max_wait: Duration::from_millis(5),
                    max_in_flight: 16,
                },
                heartbeat: heartbeat.then_some(None),
                redrive: None,
                create_if_missing: false,
                health: crate::health::HealthCells::new("q", crate::health::DEFAULT_GIVE_UP_AFTER),
                // As under `Engine::run`: no handler waits for an answer.
                answers: crate::settle::Answers::Detached,
            },
            Arc::new(StatsCells::default()),
        )
        .await
        .unwrap_or_else(|error| panic!("the stand-in queue opens: {error}"));
        Self {
            queue: Arc::new(queue),
            workers: Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
        }
    }

    /// Hands `batch` to `handler` as the engine does, waits until every handler returned and
    /// settled, and returns the settlement entries taken from the coalescer.
    ///
    /// # Panics
    ///
    /// When a handler panics.
    pub async fn dispatch<H: Handler>(
        &self,
        handler: &Arc<H>,
        batch: Vec<ReceivedMessage>,
    ) -> usize {
        let now = Instant::now();
        let mut handles = Vec::with_capacity(batch.len());
        for message in batch {
            let delivery = Delivery::new(Arc::clone(&self.queue), message, None, None, now);
            let permit = Arc::clone(&self.workers)
                .try_acquire_owned()
                .unwrap_or_else(|_| panic!("the bench's worker pool has room"));
            handles.push(crate::engine::handle_one(
                Arc::clone(handler),
                delivery,
                permit.into(),
            ));
        }
        tokio::spawn(crate::engine::JoinAll::new(handles))
            .await
            .unwrap_or_else(|error| panic!("a handler panicked: {error}"));
        crate::settle::take_due(&self.queue.settler)
    }
}
