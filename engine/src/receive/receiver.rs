//! Long-poll receivers: each loops on `ReceiveMessage` while the engine has room for a batch.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, debug_span, error, warn};

use crate::api::{CallErrorKind, ReceiveRequest};
use crate::handle::system_attributes::SystemAttributes;
use crate::health::AfterFailure;
use crate::metrics::Action;
use crate::receive::count::{Answered, Next, ReceiverCount};
use crate::receive::delivery::Delivery;
use crate::receive::lapse_bound;
use crate::receive::queue::QueueRuntime;
use crate::receive::receive_rate::{MaxReceiveRate, ReceiveRate};
use crate::room::held::{BatchRoom, HeldRoom};
use crate::sqs::backoff::Backoff;
use crate::sqs::caught::caught;

/// How long SQS deduplicates a FIFO receive by its `ReceiveRequestAttemptId`: a retry later
/// than this after the attempt's first call gets a new id.
const ATTEMPT_ID_WINDOW: Duration = Duration::from_secs(5 * 60);

/// How long a receiver waiting for room under the lapse bound waits before it looks again,
/// if nothing told it to sooner.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// How a receiver backs off after a failed receive: from 100 ms up to 10 s, for as long as
/// the failures last.
const RECEIVE_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(10));

/// One receiver's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReceiverConfig {
    pub(crate) max_messages: u8,
    pub(crate) wait_time: Duration,
    pub(crate) system_attributes: SystemAttributes,
    /// The most messages a second the receivers take, if capped.
    pub(crate) max_rate: Option<MaxReceiveRate>,
}

/// The receivers of one queue and what they share. How many run is
/// [`ReceiverCount`]'s to decide (see `count.rs` for the policy); they act on its answers.
pub(crate) struct Receivers {
    pub(crate) queue: Arc<QueueRuntime>,
    pub(crate) config: ReceiverConfig,
    /// The messages the consumer may hold, their bytes and the prefetch: a receive batch's
    /// room taken before each call, its messages' bytes after it.
    pub(crate) room: Arc<HeldRoom>,
    pub(crate) stop: CancellationToken,
    pub(crate) tasks: TaskTracker,
    pub(crate) runtime: tokio::runtime::Handle,
    /// How many receivers run, and what decides it.
    count: Mutex<ReceiverCount>,
    /// Messages received that left the prefetch so far: counted as each is handed out, without
    /// the count's lock, and read by the count at its decisions.
    taken: AtomicU64,
    /// The cap on messages received a second, when set: each receive takes its batch first.
    rate: Option<ReceiveRate>,
    /// Set before `stop` when the settlement stays open after the receivers (see
    /// [`finish_open_polls`](Self::finish_open_polls)).
    finish_polls: AtomicBool,
    /// The long polls finished on the side: the settlement drains only after they answered.
    aside: TaskTracker,
}

impl Receivers {
    /// The receivers of `queue`, none running yet: call [`start`](Self::start).
    pub(crate) fn new(
        queue: Arc<QueueRuntime>,
        config: ReceiverConfig,
        room: Arc<HeldRoom>,
        stop: CancellationToken,
        runtime: tokio::runtime::Handle,
        most: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            queue,
            config,
            room,
            stop,
            tasks: TaskTracker::new(),
            runtime,
            count: Mutex::new(ReceiverCount::new(config.max_messages, most)),
            taken: AtomicU64::new(0),
            finish_polls: AtomicBool::new(false),
            aside: TaskTracker::new(),
            rate: config
                .max_rate
                .map(|rate| ReceiveRate::new(rate, config.max_messages, Instant::now())),
        })
    }

    /// Starts the first receiver, which hands what it receives to `out` (each receiver holds
    /// a sender: the channel closes when the last one ends).
    pub(crate) fn start(self: &Arc<Self>, out: mpsc::Sender<Vec<Delivery>>) {
        self.count().start_first();
        self.report_active();
        self.spawn(out);
        self.tasks.close();
    }

    /// The receivers' count, locked: plain data, and no code under the lock panics.
    fn count(&self) -> MutexGuard<'_, ReceiverCount> {
        self.count.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many receivers run now.
    pub(crate) fn active(&self) -> usize {
        self.count().active()
    }

    /// Carries out what the count decided for a receiver: starts the receivers it counted
    /// in, and reports how many run when that changed. Whether the receiver ends is the
    /// caller's to act on.
    fn act(self: &Arc<Self>, next: Next, out: &mpsc::Sender<Vec<Delivery>>) -> Next {
        let starts = match next {
            Next::Go { start } => start,
            Next::End => 0,
        };
        for _ in 0..starts {
            self.spawn(out.clone());
        }
        if starts > 0 || next == Next::End {
            self.report_active();
        }
        next
    }

    /// Sets the receivers-running gauge from the count.
    fn report_active(&self) {
        self.queue.metrics.receivers_active(self.active() as f64);
    }

    /// A receiver received `count` messages, which wait for a worker. The count and its
    /// gauge move together here and in [`left_prefetch`](Self::left_prefetch) only.
    fn received(&self, count: usize) {
        self.count().received(count);
        self.queue.metrics.prefetched(count as f64);
    }

    /// `count` messages received left the prefetch, handed out (to a worker, or to the FIFO
    /// gate) or returned to the queue: room to receive as many again.
    pub(crate) fn left_prefetch(&self, count: usize) {
        self.taken.fetch_add(count as u64, Ordering::Relaxed);
        self.queue.metrics.prefetched(-(count as f64));
        self.room.left_prefetch(count);
        self.queue.capacity.moved();
    }

    /// How many messages a receive asks for now: a full batch, or, with the heartbeat off, the
    /// room under what the workers start before the messages' visibility lapses, beside the
    /// messages waiting in the prefetch and for a worker (see [`lapse_bound`]); 0 when there
    /// is none.
    fn to_ask(&self) -> u8 {
        let queue = &self.queue;
        let bound = lapse_bound::waiting_bound(queue.lapse_window, queue.capacity.per_second());
        if bound.is_none() {
            return self.config.max_messages;
        }
        let waiting = self.count().waiting(self.taken.load(Ordering::Relaxed))
            + queue.capacity.waiting_for_worker() as u64;
        lapse_bound::messages_to_ask(self.config.max_messages, bound, waiting)
    }

    /// Returns once a receive may ask for a message (see [`to_ask`](Self::to_ask)); `false`
    /// when `stop` is cancelled first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it takes nothing.
    async fn room_to_ask(&self, stop: &CancellationToken) -> bool {
        if self.queue.lapse_window.is_none() {
            return true;
        }
        loop {
            let moved = self.queue.capacity.on_move().notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            if self.to_ask() > 0 {
                return true;
            }
            // Told when messages leave the prefetch or stop waiting for a worker, or a handler
            // ends; looked at again after a while whatever happens.
            tokio::select! {
                biased;
                () = stop.cancelled() => return false,
                () = moved => {}
                () = tokio::time::sleep(LOOK_AGAIN) => {}
            }
        }
    }

    /// A taker found nothing received and waits for a receive until the guard is dropped.
    pub(crate) fn taker_waits(self: &Arc<Self>) -> TakerWaiting {
        self.count().taker_waits();
        TakerWaiting(Arc::clone(self))
    }

    fn spawn(self: &Arc<Self>, out: mpsc::Sender<Vec<Delivery>>) {
        let index = self.active();
        self.tasks.spawn_on(
            run(Arc::clone(self), out)
                .instrument(debug_span!("receiver", queue = %self.queue.name, index)),
            &self.runtime,
        );
    }

    /// Call before `stop` when the settlement stays open after the receivers: a long poll
    /// still open when its receiver's grace ends is then finished on the side, holding the
    /// settlement open, and what it brings goes back at once (visibility 0). Abandoned, SQS
    /// would still answer it, and hide what it took for the visibility timeout: a message
    /// requeued after the receivers stopped included.
    pub(crate) fn finish_open_polls(&self) {
        self.finish_polls.store(true, Ordering::Release);
    }

    /// Waits until every receiver has ended.
    pub(crate) async fn wait(&self) {
        self.tasks.wait().await;
    }

    /// Waits until every long poll finished on the side has answered and returned what it
    /// brought. Call it once the receivers ended and the settlement was let go: none starts
    /// after that.
    pub(crate) async fn polls_aside_answered(&self) {
        self.aside.close();
        self.aside.wait().await;
    }
}

/// One receiver: receives until `stop` is cancelled, the dispatcher goes away, or a receive
/// that brought less than a full batch ends it (see [`Receivers`]).
///
/// Before each call it takes room for `max_messages` in the prefetch (the messages that may
/// wait received and not yet handed out) and among the messages the consumer may hold at once
/// (handed out and unsettled, or waiting), so it never receives more than can start soon:
/// while either is full, it waits instead of polling (see [`Room`](crate::room::state::Room)).
/// After the call, the messages it brought take their size (bodies and message attributes)
/// among the bytes held: made deliveries first, so that the heartbeat keeps them invisible
/// however long they wait for that room. Their room in the prefetch is given back as the
/// consumer hands them out.
/// With the heartbeat off, a receive asks for no more messages than keep those waiting for a
/// worker within what the workers start before their visibility lapses, and none is made while
/// that leaves no room (see [`lapse_bound`]).
/// A failed receive backs off with jitter and tries again, for as long as it fails; after a
/// transient failure, a receiver that is not the last ends instead (unless it has a FIFO
/// attempt to retry), so that an overloaded server is not met with every receive again.
///
/// When `stop` is cancelled during a long poll, the poll gets four round trips (as measured on
/// the queue's short calls; a second before any was measured) to answer; what it brings
/// is returned at once (visibility 0). A poll still open after that is abandoned: a message SQS
/// handed out in its answer comes back when its visibility timeout lapses. Unless the
/// settlement stays open after the receivers ([`Receivers::finish_open_polls`]): then the poll
/// is finished on the side, and what it brings goes back at once. While receiving is paused
/// ([`PauseHandle`](crate::PauseHandle)) no receive starts, and a long poll under way when it
/// pauses is finished on the side the same way.
async fn run(set: Arc<Receivers>, out: mpsc::Sender<Vec<Delivery>>) {
    let queue = &set.queue;
    let config = set.config;
    let stop = &set.stop;
    let backoff = Backoff::new(RECEIVE_BACKOFF.0, RECEIVE_BACKOFF.1, u32::MAX);
    let mut failures: u32 = 0;
    // On a FIFO queue, the attempt id of the receive under way and when its first call was
    // made: kept when a call gets no answer (it may have taken messages), so its retry gets
    // them rather than hiding them, for as long as SQS deduplicates by it.
    let mut attempt: Option<(String, Instant, u8)> = None;
    let mut paused = queue.paused.clone();
    loop {
        // With the heartbeat off, no more messages waiting than the workers start before
        // their visibility lapses.
        if !set.room_to_ask(stop).await {
            return;
        }
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = paused.until_resumed() => {}
        }
        let mut room = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            room = set.room.batch() => room,
        };
        // Settlement falling behind holds receiving back (see Settler::until_not_backlogged).
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = queue.settler.until_not_backlogged() => {}
        }
        // Under a rate cap, a whole batch's worth first (what the answer does not use is
        // given back below).
        if let Some(rate) = &set.rate {
            while let Err(wait) = rate.take_batch(Instant::now()) {
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
        // A call to the queue failed against an overloaded server while this one waited: no
        // receive from a receiver one more than the round trip's measurement wants.
        let next = set
            .count()
            .before_call(queue.pressure.marks(), attempt.is_some());
        if set.act(next, &out) == Next::End {
            return;
        }
        // Asked again after the waits above, which may have changed it; at least one, as
        // another receiver may have taken the room since.
        let ask = set.to_ask().max(1);
        if queue.fifo
            && attempt
                .as_ref()
                .is_none_or(|(_, first, _)| first.elapsed() >= ATTEMPT_ID_WINDOW)
        {
            attempt = Some((attempt_id(), Instant::now(), ask));
        }
        // A retry of an attempt asks for what its first call asked for.
        let ask = attempt.as_ref().map_or(ask, |(_, _, asked)| *asked);
        // The visibility deadline is counted from before the call (a retry of an attempt
        // restarts it), the 12-hour window from before the attempt's first call, which may
        // have started it: never later than SQS's own.
        let called_at = Instant::now();
        let first_called_at = attempt.as_ref().map_or(called_at, |(_, first, _)| *first);
        let result = {
            // Owned, so that a poll the stop cuts short can be finished on the side.
            let mut receive = Box::pin({
                let queue = Arc::clone(queue);
                let attempt_id = attempt.as_ref().map(|(id, _, _)| id.clone());
                async move {
                    let request = ReceiveRequest {
                        queue_url: &queue.url,
                        max_messages: ask,
                        wait_time: config.wait_time,
                        visibility_timeout: queue.visibility_timeout,
                        attempt_id: attempt_id.as_deref(),
                        system_attributes: config.system_attributes.names(),
                    };
                    caught(queue.api.receive(&request)).await
                }
            });
            tokio::select! {
                biased;
                result = &mut receive => result,
                () = stop.cancelled() => {
                    // A poll already under way may be handing out messages right now: give it a
                    // moment, and return what it brings at once rather than strand it.
                    match tokio::time::timeout(queue.round_trip.shutdown_grace(), &mut receive).await {
                        Ok(result) => {
                            queue.metrics.call(Action::ReceiveMessage, result.is_ok());
                            if let Ok(messages) = result {
                                return_at_once(queue, messages, &mut room, called_at);
                            }
                        }
                        Err(_) if set.finish_polls.load(Ordering::Acquire) => {
                            finish_aside(&set, receive, room, called_at);
                        }
                        Err(_) => queue.metrics.receive_abandoned(),
                    }
                    return;
                }
                () = paused.until_paused() => {
                    // Paused: what the poll still brings goes back unhandled, and the receiver
                    // waits at the top of its loop for the resume.
                    finish_aside(&set, receive, room, called_at);
                    attempt = None;
                    if let Some(rate) = &set.rate {
                        rate.give_back(usize::from(config.max_messages), Instant::now());
                    }
                    continue;
                }
            }
        };
        // A call that got no answer may have taken messages: its retry keeps the attempt id.
        if !result.as_ref().is_err_and(|failure| failure.is_transient()) {
            attempt = None;
        }
        queue.metrics.call(Action::ReceiveMessage, result.is_ok());
        if let Some(rate) = &set.rate {
            let used = result.as_ref().map_or(0, Vec::len);
            rate.give_back(
                usize::from(config.max_messages).saturating_sub(used),
                Instant::now(),
            );
        }
        match result {
            Ok(messages) => {
                failures = 0;
                queue.health.receive_succeeded();
                if messages.is_empty() {
                    let next = set.count().after_empty();
                    if set.act(next, &out) == Next::End {
                        return;
                    }
                    continue;
                }
                let full = messages.len() >= usize::from(config.max_messages);
                if full {
                    // Only a full receive measures the round trip: a partly filled one may
                    // have waited out its long poll.
                    set.count().answered_full(called_at.elapsed());
                }
                let sizes: Vec<usize> = messages
                    .iter()
                    .map(|message| held_kib(queue.payloads.held_bytes(message)))
                    .collect();
                let wanted = sizes.iter().sum::<usize>();
                // Deliveries first, so that the heartbeat keeps them invisible while they wait
                // for their room below, however long that takes.
                queue.metrics.received(messages.len());
                let mut deliveries: Vec<Delivery> = messages
                    .into_iter()
                    .map(|message| {
                        Delivery::of_attempt(
                            Arc::clone(queue),
                            message,
                            Some(room.slot()),
                            None,
                            called_at,
                            first_called_at,
                        )
                    })
                    .collect();
                // The slots not used go back now; the prefetch's room as the deliveries are
                // handed out.
                room.free_slots();
                // Their room among the bytes held: waited for with the messages in hand, so the
                // cap may be passed by what the receives in flight bring, never by more.
                let mut bytes = tokio::select! {
                    biased;
                    () = stop.cancelled() => {
                        crate::receive::delivery::return_all(queue, deliveries);
                        return;
                    }
                    bytes = set.room.kib(wanted) => bytes,
                };
                for (delivery, kib) in deliveries.iter_mut().zip(sizes) {
                    delivery.hold(bytes.body(kib));
                }
                drop(bytes);
                // Bodies stored in S3 fetched, with the messages held and kept invisible.
                let deliveries = stored::resolve(queue, deliveries).await;
                room.keep_ahead(deliveries.len());
                drop(room);
                let own = deliveries.len();
                set.received(own);
                if let Some(age) = oldest_age(&deliveries) {
                    queue.metrics.oldest_age(age.as_secs_f64());
                }
                // All of them unreadable from S3 (settled already): nothing to hand out.
                if !deliveries.is_empty()
                    && let Err(unsent) = out.send(deliveries).await
                {
                    // Nobody takes them any more: back to the queue at once.
                    set.left_prefetch(unsent.0.len());
                    crate::receive::delivery::return_all(queue, unsent.0);
                    return;
                }
                // Full, and the workers keep up: perhaps more. Full, but the workers fall
                // behind, or not full: one fewer (not the last). Cut to one while the round
                // trip is measured again.
                let answered = Answered {
                    called_at,
                    full,
                    own,
                    taken: set.taken.load(Ordering::Relaxed),
                    pressure: queue.pressure.marks(),
                    room: set.room.ahead_batches(),
                    could_take: queue.capacity.per_second(),
                    rate_cap: set.rate.as_ref().map(ReceiveRate::per_second),
                    stopping: stop.is_cancelled(),
                };
                let next = set.count().after_batch(Instant::now(), answered);
                if set.act(next, &out) == Next::End {
                    return;
                }
            }
            Err(failure) => {
                drop(room);
                if failure.is_transient() {
                    queue.pressure.mark();
                }
                if queue.health.receive_failed(&failure) == AfterFailure::GiveUp {
                    error!(queue = %queue.name, error = %failure, "receive failed in a way retrying cannot mend for longer than the engine's give_up_after: no more receives");
                    return;
                }
                // A server that throttles, fails or does not answer in time gets fewer receives
                // in flight, not as many retrying: this receiver ends (not the last, which
                // retries with backoff), and full receives start others once it answers
                // again. A FIFO receive to retry under its attempt id is retried by its own
                // receiver, which may get what the call took.
                let next = set.count().after_failure(
                    queue.pressure.marks(),
                    failure.is_transient(),
                    attempt.is_some(),
                );
                if set.act(next, &out) == Next::End {
                    debug!(queue = %queue.name, error = %failure, "receive failed; one receiver fewer");
                    return;
                }
                failures = failures.saturating_add(1);
                let delay = backoff.jittered(failures);
                if failure.kind == CallErrorKind::QueueNotFound {
                    error!(queue = %queue.name, error = %failure, "receive failed: the queue does not exist; retrying in {delay:?}");
                } else {
                    warn!(queue = %queue.name, error = %failure, failures, "receive failed; retrying in {delay:?}");
                }
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// A taker waiting for a receive (see [`Receivers::taker_waits`]): dropped when the wait ends,
/// answered or not.
pub(crate) struct TakerWaiting(Arc<Receivers>);

impl Drop for TakerWaiting {
    fn drop(&mut self) {
        self.0.count().taker_done(Instant::now());
    }
}

/// The room a message of `bytes` takes among the bytes held, in KiB (at least one).
fn held_kib(bytes: usize) -> usize {
    bytes.div_ceil(1024).max(1)
}

/// A fresh `ReceiveRequestAttemptId`: 32 random hexadecimal digits (SQS takes up to 128
/// characters).
fn attempt_id() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// Returns messages received at shutdown to the queue at once (visibility 0).
fn return_at_once(
    queue: &Arc<QueueRuntime>,
    messages: Vec<crate::api::ReceivedMessage>,
    room: &mut BatchRoom,
    called_at: Instant,
) {
    if messages.is_empty() {
        return;
    }
    queue.metrics.received(messages.len());
    for message in messages {
        let delivery = Delivery::new(
            Arc::clone(queue),
            message,
            Some(room.slot()),
            None,
            called_at,
        );
        delivery.settle_detached(crate::handle::outcome::Outcome::Retry);
    }
}

/// Finishes a long poll its receiver stopped waiting for, and returns what it brings at once
/// (see [`Receivers::finish_open_polls`]): the settlement drains only after it answered (see
/// [`Receivers::polls_aside_answered`]).
fn finish_aside(
    set: &Receivers,
    receive: impl Future<Output = Result<Vec<crate::api::ReceivedMessage>, crate::api::CallError>>
    + Send
    + 'static,
    mut room: BatchRoom,
    called_at: Instant,
) {
    let queue = Arc::clone(&set.queue);
    // What it brings never waits to be handed out.
    room.free_ahead();
    set.aside.spawn_on(
        async move {
            let result = receive.await;
            queue.metrics.call(Action::ReceiveMessage, result.is_ok());
            if let Ok(messages) = result {
                return_at_once(&queue, messages, &mut room, called_at);
            }
        },
        &set.runtime,
    );
}

/// The age of the oldest message among `deliveries`, from their `SentTimestamp`.
fn oldest_age(deliveries: &[Delivery]) -> Option<Duration> {
    let now = std::time::SystemTime::now();
    deliveries
        .iter()
        .filter_map(|d| d.message().sent_at())
        .filter_map(|sent| now.duration_since(sent).ok())
        .max()
}

mod stored;
#[cfg(test)]
mod tests;
