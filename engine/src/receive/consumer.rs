//! The pull side of the engine: receivers, settlement and heartbeat for one queue, with the
//! deliveries handed to whoever asks for them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::runtime::Handle as RuntimeHandle;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug_span, info};

use crate::handle::outcome::Outcome;
use crate::metrics::{Stats, StatsCells};
use crate::receive::delivery::{self, Delivery};
use crate::receive::fifo::{FifoOrder, Gate};
use crate::receive::queue::QueueRuntime;
use crate::receive::receiver::{ReceiverConfig, Receivers};
use crate::room::held::HeldRoom;
use crate::settle;
use crate::settle::hold::Hold;

/// Deliveries from one queue, to settle one by one.
///
/// The receivers and the settlement driver (which also runs the heartbeat) run as tasks on the
/// runtime the consumer was opened on; this value hands out what they receive. Use it where something else
/// schedules the work (a framework's dispatch loop); [`Engine::run`](crate::Engine::run) is the
/// same machinery with a worker pool on top.
///
/// Dropping the consumer stops its receivers and returns the messages received but not yet
/// handed out (visibility 0). Deliveries already handed out can still be settled until
/// [`ConsumerHandle::shutdown`] completes; after [`ConsumerHandle::release`], until the last
/// of them is settled or dropped.
pub struct Consumer {
    rx: mpsc::Receiver<Vec<Delivery>>,
    /// Set once the receivers are gone and everything they sent was taken in.
    rx_done: bool,
    buffered: VecDeque<Delivery>,
    /// On a FIFO queue, the group gate the receives go through: one delivery of a group at a
    /// time is handed out.
    gate: Option<Arc<Gate>>,
    handle: ConsumerHandle,
    /// Keeps the settlement open for what the consumer holds and returns; let go once it
    /// holds nothing ([`close`](Self::close), or dropped after returning it).
    hold: Option<Hold>,
}

/// Controls a [`Consumer`]'s tasks from anywhere: stop receiving, then shut down.
#[derive(Clone)]
pub struct ConsumerHandle {
    inner: Arc<Inner>,
}

struct Inner {
    queue: Arc<QueueRuntime>,
    stats: Arc<StatsCells>,
    stop_receiving: CancellationToken,
    receivers: Arc<Receivers>,
    settle_tasks: TaskTracker,
    /// The owner's hold on the settlement, let go by [`ConsumerHandle::release`] (or when the
    /// last handle and the consumer are gone).
    owner: Mutex<Option<Hold>>,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("queue", &&*self.handle.inner.queue.name)
            .field("buffered", &self.buffered.len())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ConsumerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerHandle")
            .field("queue", &&*self.inner.queue.name)
            .finish_non_exhaustive()
    }
}

/// How many receivers, and how much room for messages held.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConsumerConfig {
    /// The most receivers at once (the engine runs as many as keep up, at least one).
    pub(crate) receivers: usize,
    /// Messages held at once: received and not yet settled (waiting, being handled, or
    /// waiting for SQS's answer to their settlement).
    pub(crate) capacity: usize,
    /// KiB of messages (bodies and message attributes) held at once.
    pub(crate) capacity_kib: usize,
    /// Of those, the most received and not yet handed out (at least one receive batch).
    pub(crate) ahead: usize,
    pub(crate) receive: ReceiverConfig,
    /// On a FIFO queue, hand out one delivery of a group at a time, passing the turn on as
    /// this says; `None` hands out whole receives (a batch handler owns their order).
    pub(crate) fifo_order: Option<FifoOrder>,
}

impl Consumer {
    /// Starts the tasks of an opened queue on `runtime`.
    pub(crate) fn start(
        queue: Arc<QueueRuntime>,
        stats: Arc<StatsCells>,
        config: ConsumerConfig,
        runtime: &RuntimeHandle,
    ) -> Self {
        let settle_tasks = TaskTracker::new();
        let holds = Arc::clone(&queue.settler.holds);
        let owner = Hold::new(&holds);
        let hold = Hold::new(&holds);
        settle_tasks.spawn_on(
            settle::run(Arc::clone(&queue.settler), settle_tasks.clone())
                .instrument(debug_span!("settlement", queue = %queue.name)),
            runtime,
        );
        settle_tasks.spawn_on(
            crate::metrics::parked::expire(
                Arc::clone(queue.metrics.parked()),
                queue.settler.draining().clone(),
            )
            .instrument(debug_span!("parked", queue = %queue.name)),
            runtime,
        );

        // The engine giving up (on a receive, a delete or a visibility change) stops receiving.
        let stop_receiving = queue.health.gave_up_token().child_token();
        let room = HeldRoom::new(
            config.capacity,
            config.capacity_kib,
            config.ahead,
            usize::from(config.receive.max_messages),
            Arc::clone(&queue.metrics),
        );
        let (tx, rx) = mpsc::channel::<Vec<Delivery>>(config.capacity.max(1));
        let receivers = Receivers::new(
            Arc::clone(&queue),
            config.receive,
            room,
            stop_receiving.clone(),
            runtime.clone(),
            config.receivers,
        );
        receivers.start(tx);
        // The settlement drains when told to (`shutdown`), or once the last hold on it went
        // (`release`, then every delivery and the consumer) and the polls finished on the side
        // answered.
        settle_tasks.spawn_on(
            drain_once_released(Arc::clone(&queue.settler), Arc::clone(&receivers)),
            runtime,
        );
        let gate = config.fifo_order.filter(|_| queue.fifo).map(Gate::new);
        Self {
            rx,
            rx_done: false,
            buffered: VecDeque::new(),
            gate,
            hold: Some(hold),
            handle: ConsumerHandle {
                inner: Arc::new(Inner {
                    queue,
                    stats,
                    stop_receiving,
                    receivers,
                    settle_tasks,
                    owner: Mutex::new(Some(owner)),
                }),
            },
        }
    }

    /// A handle to stop and shut down the consumer's tasks.
    pub fn handle(&self) -> ConsumerHandle {
        self.handle.clone()
    }

    /// The queue's URL, as `GetQueueUrl` answered it (or as given).
    pub fn queue_url(&self) -> &str {
        self.handle.queue_url()
    }

    /// The next delivery, or `None` once the consumer stopped receiving and has nothing left.
    ///
    /// On a FIFO queue, at most one delivery of each message group is out at a time: the next
    /// of a group comes once the one before is settled (see [`FifoOrder`]).
    ///
    /// With the heartbeat off, a message that waited received for longer than the visibility
    /// timeout is not handed out: SQS hands it out again, and a handler given it would work on
    /// a copy another receive may hold (counted in [`Stats::lapsed`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a delivery is either returned or stays for the next call.
    pub async fn recv(&mut self) -> Option<Delivery> {
        if let Some(gate) = self.gate.clone() {
            return self.recv_in_turn(&gate).await;
        }
        loop {
            if let Some(delivery) = self.pop_buffered() {
                return Some(delivery);
            }
            let batch = self.next_received().await?;
            self.buffered.extend(batch);
        }
    }

    /// Takes the next delivery of the receives taken in out of the prefetch, letting go of
    /// those whose visibility lapsed while they waited (see [`Delivery::lapsed`]).
    fn pop_buffered(&mut self) -> Option<Delivery> {
        let mut found = None;
        self.take_buffered(1, |delivery| found = Some(delivery));
        found
    }

    /// Hands up to `max` deliveries of the receives taken in to `take`, in order, letting go of
    /// those whose visibility lapsed while they waited (see [`Delivery::lapsed`]); they leave
    /// the prefetch either way.
    fn take_buffered(&mut self, max: usize, mut take: impl FnMut(Delivery)) {
        let now = Instant::now();
        let mut left = 0;
        let mut handed = 0;
        while handed < max
            && let Some(delivery) = self.buffered.pop_front()
        {
            left += 1;
            if let Some(delivery) = delivery.unless_lapsed(now) {
                handed += 1;
                take(delivery);
            }
        }
        self.handed_out(left);
    }

    /// The next delivery whose group's turn it is, letting go of those whose visibility lapsed
    /// while they waited (the rest of their group then goes back).
    fn pop_ready(gate: &Gate) -> Option<Delivery> {
        let now = Instant::now();
        loop {
            if let Some(delivery) = gate.pop_ready()?.unless_lapsed(now) {
                return Some(delivery);
            }
        }
    }

    /// The next delivery whose group's turn it is, taking in receives meanwhile.
    async fn recv_in_turn(&mut self, gate: &Arc<Gate>) -> Option<Delivery> {
        loop {
            if let Some(delivery) = Self::pop_ready(gate) {
                return Some(delivery);
            }
            if self.rx_done {
                if gate.is_empty() {
                    return None;
                }
                gate.readied().await;
                continue;
            }
            // Nothing ready: a taker waits, which is what grows the receivers.
            let _waiting = self.handle.inner.receivers.taker_waits();
            // Biased: both branches loop back to the gate, so neither starves the other, and a
            // fixed order keeps a run on a paused clock the same from one seed to the next.
            tokio::select! {
                biased;
                batch = self.rx.recv() => match batch {
                    Some(batch) => {
                        // Taken in: the gate holds them now, out of the prefetch's room.
                        self.handed_out(batch.len());
                        gate.admit(batch);
                    }
                    None => self.rx_done = true,
                },
                () = gate.readied() => {}
            }
        }
    }

    /// The next receive's deliveries, or `None` once the receivers are done. A wait for one
    /// is the signal that grows the receivers.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as `mpsc::Receiver::recv`.
    async fn next_received(&mut self) -> Option<Vec<Delivery>> {
        match self.rx.try_recv() {
            Ok(batch) => return Some(batch),
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
            Err(mpsc::error::TryRecvError::Empty) => {}
        }
        let _waiting = self.handle.inner.receivers.taker_waits();
        self.rx.recv().await
    }

    /// The queue this consumer receives from, as the engine runs it.
    pub(crate) fn runtime(&self) -> &Arc<QueueRuntime> {
        &self.handle.inner.queue
    }

    /// `count` deliveries left the buffer: room to receive as many again.
    fn handed_out(&self, count: usize) {
        self.handle.inner.receivers.left_prefetch(count);
    }

    /// The next delivery of the receive batch already taken in (on a FIFO queue: the next
    /// whose group's turn it is), without waiting.
    pub(crate) fn try_recv_buffered(&mut self) -> Option<Delivery> {
        if let Some(gate) = &self.gate {
            return Self::pop_ready(gate);
        }
        self.pop_buffered()
    }

    /// Whether a delivery can be handed out without waiting for a receive (on a FIFO queue,
    /// one whose group's turn it is, or a receive not yet sorted into turns).
    pub(crate) fn has_ready(&self) -> bool {
        let ready = match &self.gate {
            Some(gate) => gate.has_ready(),
            None => !self.buffered.is_empty(),
        };
        ready || !self.rx.is_empty()
    }

    /// The deliveries of the next receive call, at most `max` (at least one), or `None` once
    /// the consumer stopped receiving and has nothing left. A receive larger than `max` is
    /// handed out over several calls, in order. On a FIFO queue, at most one delivery of each
    /// group, as [`recv`](Self::recv) hands them out.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: deliveries are either returned or stay for the next call.
    pub async fn recv_batch(&mut self, max: usize) -> Option<Vec<Delivery>> {
        let max = max.max(1);
        if let Some(gate) = self.gate.clone() {
            let mut batch = vec![self.recv_in_turn(&gate).await?];
            while batch.len() < max
                && let Some(delivery) = Self::pop_ready(&gate)
            {
                batch.push(delivery);
            }
            return Some(batch);
        }
        loop {
            if self.buffered.is_empty() {
                let batch = self.next_received().await?;
                self.buffered.extend(batch);
            }
            let mut batch = Vec::with_capacity(max.min(self.buffered.len()));
            self.take_buffered(max, |delivery| batch.push(delivery));
            if !batch.is_empty() {
                return Some(batch);
            }
        }
    }

    /// Stops receiving, and returns every message received but not handed out (visibility 0),
    /// waiting for the receivers to finish (a poll under way gets four round trips to answer).
    pub async fn close(&mut self) {
        self.handle.stop_receiving();
        // The receivers finish first, so that what goes back is not received again by a poll
        // still under way.
        self.handle.inner.receivers.wait().await;
        let mut returned: Vec<Delivery> = self.buffered.drain(..).collect();
        while let Ok(batch) = self.rx.try_recv() {
            returned.extend(batch);
        }
        self.rx.close();
        self.handed_out(returned.len());
        delivery::return_all(&self.handle.inner.queue, returned);
        self.return_gated();
        // Everything it held is queued: the settlement no longer stays open for it.
        self.hold = None;
    }

    /// Returns what the FIFO gate holds, ready or waiting for its group (already counted as
    /// taken in).
    fn return_gated(&self) {
        if let Some(gate) = &self.gate {
            for delivery in gate.take_all() {
                delivery.settle_detached(Outcome::Retry);
            }
        }
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.handle.stop_receiving();
        self.rx.close();
        let mut returned: Vec<Delivery> = self.buffered.drain(..).collect();
        while let Ok(batch) = self.rx.try_recv() {
            returned.extend(batch);
        }
        self.handed_out(returned.len());
        delivery::return_all(&self.handle.inner.queue, returned);
        self.return_gated();
    }
}

impl ConsumerHandle {
    /// Stops the receivers. Polls under way get four round trips to answer; what they bring goes back
    /// at once.
    pub fn stop_receiving(&self) {
        self.inner.queue.health.draining();
        self.inner.stop_receiving.cancel();
    }

    /// What the consumer has done so far.
    pub fn stats(&self) -> Stats {
        self.inner.stats.snapshot()
    }

    /// The consumer's health: whether its receives succeed, whether it is draining. When its
    /// receives, deletes or visibility changes fail in a way retrying cannot mend for longer
    /// than the engine's
    /// [`give_up_after`](crate::EngineBuilder::give_up_after), the receivers stop and
    /// [`Consumer::recv`] returns `None` once what they brought is taken.
    pub fn health(&self) -> crate::HealthHandle {
        crate::HealthHandle(Arc::clone(&self.inner.queue.health))
    }

    /// The queue's name.
    pub fn queue(&self) -> &str {
        &self.inner.queue.name
    }

    /// The queue's URL, as `GetQueueUrl` answered it (or as given).
    pub fn queue_url(&self) -> &str {
        &self.inner.queue.url
    }

    /// Stops receiving, waits for the receivers, stops extending, sends every pending
    /// settlement and waits for SQS's answers. Settlements made after this completes fail with
    /// [`SettleError::Stopped`](crate::SettleError::Stopped).
    ///
    /// Call it once every delivery handed out is settled or dropped: the heartbeat stops here,
    /// so a delivery still held keeps only the visibility it has.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the shutdown half done; calling it again finishes it.
    pub async fn shutdown(&self) {
        self.stop_and_let_go(true).await;
        self.stopped().await;
    }

    /// Stops receiving, waits for the receivers, and lets go of the settlement: it stays open,
    /// heartbeat included, for as long as the [`Consumer`] or any delivery it handed out is
    /// left, so that a settlement made meanwhile is sent and what the consumer returns as it
    /// is dropped goes back at once. A long poll the stop cut short holds it open too, until
    /// SQS answers it (within the receive's wait time), and what it brings goes back at once,
    /// so a message requeued meanwhile is not hidden by an answer nobody reads. Once the last
    /// of them is done, every pending settlement is sent and answered, and this returns.
    ///
    /// Unlike [`shutdown`](Self::shutdown), it asks no order of its caller; it does wait for
    /// whoever holds a delivery or the consumer, so the task that awaits it must not be the
    /// one holding them (or must bound the wait: the settlement stays open all the same).
    ///
    /// # Cancel safety
    ///
    /// Once the receivers are done, dropping the future lets go all the same; calling it again
    /// waits for the rest.
    pub async fn release(&self) {
        self.stop_and_let_go(false).await;
        self.stopped().await;
    }

    /// Lets go of the settlement as [`release`](Self::release) does, waiting at most `grace`
    /// for the holders once the receivers are done. Once the last holder goes within it, it
    /// waits for what they settled to be sent and answered, however long the calls and their
    /// retries take; the settlement itself drains once the polls finished on the side
    /// answered. If a holder is left after `grace`, it logs a warning and returns, and the
    /// settlement stays open until the last holder goes.
    #[cfg(feature = "ruststream")]
    pub(crate) async fn release_within(&self, grace: std::time::Duration) {
        self.stop_and_let_go(false).await;
        let settler = &self.inner.queue.settler;
        if tokio::time::timeout(grace, settler.holds.released().cancelled())
            .await
            .is_err()
        {
            tracing::warn!(
                queue = %self.inner.queue.name,
                ?grace,
                "a subscriber or a delivery is still held after the shutdown's grace: its settlement stays open until it goes, and is sent only while the runtime runs"
            );
            return;
        }
        settler.until_idle().await;
    }

    /// Stops the receivers, and lets go of the owner's hold once they are done; drains the
    /// settlement now when `drain_now` (else once the last hold goes).
    async fn stop_and_let_go(&self, drain_now: bool) {
        let inner = &self.inner;
        inner.queue.health.draining();
        if !drain_now {
            inner.receivers.finish_open_polls();
        }
        inner.stop_receiving.cancel();
        inner.receivers.wait().await;
        // Let go after the receivers are done: what they brought holds the settlement itself.
        drop(
            inner
                .owner
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if drain_now {
            inner.queue.settler.drain();
        }
    }

    /// Waits for the settlement to send and answer everything and stop.
    async fn stopped(&self) {
        let inner = &self.inner;
        inner.settle_tasks.close();
        inner.settle_tasks.wait().await;
        inner.queue.health.stopped();
        info!(queue = %inner.queue.name, "stopped");
    }
}

/// Drains the settlement once the last hold on it went and the polls `receivers` finished on
/// the side answered; ends at once when it drains first (a shutdown).
async fn drain_once_released(settler: Arc<settle::Settler>, receivers: Arc<Receivers>) {
    tokio::select! {
        () = settler.draining().cancelled() => {}
        () = async {
            settler.holds.released().cancelled().await;
            receivers.polls_aside_answered().await;
        } => settler.drain(),
    }
}

// On the in-process SQS (a test double on tokio's clock): how far the consumer receives ahead
// of what is taken from it.
#[cfg(all(test, feature = "testing"))]
mod tests {
    use std::time::Duration;

    use crate::Outcome;
    use crate::testing::InProcessSqs;

    /// Lets the consumer's tasks run until they wait for room; no timer is involved.
    async fn settle_down() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn it_receives_as_fast_as_deliveries_are_taken_and_no_further_ahead_than_prefetch() {
        let sqs = InProcessSqs::new();
        for n in 0..50 {
            sqs.send("orders", &format!("message {n}")).expect("sent");
        }
        let mut consumer = crate::testing::unit::consumer(&sqs, "orders", |engine| {
            engine
                .receivers(2)
                .workers(1_000)
                .prefetch(10)
                .heartbeat(false)
        })
        .await;
        settle_down().await;
        assert_eq!(
            sqs.counts("orders").in_flight,
            10,
            "nothing taken yet: one receive ahead, though 1,000 may be unsettled"
        );

        let mut taken = Vec::new();
        for _ in 0..10 {
            taken.push(consumer.recv().await.expect("delivery"));
        }
        settle_down().await;
        assert_eq!(
            sqs.counts("orders").in_flight,
            20,
            "ten taken, unsettled: ten more received, and no more"
        );

        for delivery in taken.drain(..) {
            delivery.settle(Outcome::Ack).await.expect("acked");
        }
        settle_down().await;
        assert_eq!(
            sqs.counts("orders").in_flight,
            10,
            "the settled ten are gone"
        );
        assert_eq!(sqs.counts("orders").visible, 30);

        let handle = consumer.handle();
        consumer.close().await;
        handle.shutdown().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(
            sqs.counts("orders").visible,
            40,
            "what was received ahead went back"
        );
    }
}
