//! A received message and the right to settle it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::api::ReceivedMessage;
use crate::handle::message::Message;
use crate::handle::message_span::message_span;
use crate::handle::outcome::Outcome;
use crate::limits::MAX_VISIBILITY;
use crate::receive::queue::QueueRuntime;
use crate::receive::turn::{Fate, Turn};
use crate::room::held::{BodyRoom, Slot};
use crate::settle::hold::Hold;
use crate::settle::plan::plan;
use crate::settle::{self, AnswerHook, Request, Settlement};

/// One received message, not yet settled.
///
/// Settle it with [`settle`](Self::settle). Dropped unsettled, it makes no call: the message
/// comes back when its visibility timeout lapses.
pub struct Delivery {
    message: Message,
    ticket: Ticket,
}

impl Delivery {
    /// A delivery of `received`, from a receive call made at `called_at`.
    ///
    /// SQS starts the message's visibility timeout, and its 12-hour window, when it hands the
    /// message out: somewhere between the call's start and its answer (a long poll may wait up
    /// to 20 s before that). Both are counted from the call's start, so the engine's deadline
    /// is never later than SQS's own: the heartbeat extends in time, and a settlement past the
    /// deadline is counted as late.
    pub(crate) fn new(
        queue: Arc<QueueRuntime>,
        received: ReceivedMessage,
        slot: Option<Slot>,
        body: Option<BodyRoom>,
        called_at: Instant,
    ) -> Self {
        Self::of_attempt(queue, received, slot, body, called_at, called_at)
    }

    /// As [`new`](Self::new), from a receive call made at `called_at` in an attempt whose
    /// first call was made at `first_called_at`: the same call, unless a FIFO receive that got
    /// no answer was retried with its attempt id. The first call may have taken the message
    /// already; SQS restarts its visibility timeout on the retry (counted from `called_at`, the
    /// call that answered), and its 12-hour window is counted from the first call.
    pub(crate) fn of_attempt(
        queue: Arc<QueueRuntime>,
        received: ReceivedMessage,
        slot: Option<Slot>,
        body: Option<BodyRoom>,
        called_at: Instant,
        first_called_at: Instant,
    ) -> Self {
        let (message, receipt) = Message::from_received(received);
        let visible_until = called_at + Duration::from_secs(u64::from(queue.visibility_timeout));
        let receipt: Arc<str> = Arc::from(receipt);
        let message_id: Arc<str> = Arc::from(message.id());
        let window_end = first_called_at.min(called_at) + MAX_VISIBILITY;
        let at_last_receive = queue
            .max_receive_count
            .is_some_and(|cap| message.receive_count() >= cap);
        queue
            .metrics
            .delivered(message.receive_count(), at_last_receive);
        queue.metrics.in_flight(1.0);
        let heartbeat = queue.settler.register(
            Arc::clone(&receipt),
            Arc::clone(&message_id),
            visible_until,
            queue
                .processing
                .extension_end(first_called_at.min(called_at), window_end),
        );
        let group = queue_fifo_group(&queue, &message);
        let hold = Hold::new(&queue.settler.holds);
        // SQS started the visibility timeout by its answer, which is now. A timeout of zero
        // hides nothing: the caller takes the copies that brings, and none lapses.
        let lapses_at = (queue.visibility_timeout > 0)
            .then(|| Instant::now() + Duration::from_secs(u64::from(queue.visibility_timeout)));
        let ticket = Ticket {
            receipt,
            message_id,
            receive_count: message.receive_count(),
            window_end,
            visible_until,
            lapses_at,
            heartbeat,
            queue,
            slot,
            body,
            turn: None,
            group,
            settled: false,
            after_delete: None,
            _hold: hold,
        };
        Self { message, ticket }
    }

    /// Gives the delivery the room its message takes among the bytes held, once it has it:
    /// freed as `body` of [`new`](Self::new) would be.
    pub(crate) fn hold(&mut self, room: Option<BodyRoom>) {
        self.ticket.body = room;
    }

    /// Whether the message's visibility has lapsed for sure by `now` while it waited to be
    /// handed out: a visibility timeout after its receive's answer, with the heartbeat off
    /// (on, the heartbeat keeps it invisible) and a timeout above zero (zero hides nothing:
    /// whoever chose it takes the copies it brings). SQS hands such a message out again: a
    /// handler given it would work on a copy another receive may hold, with a receipt handle
    /// that may no longer settle it.
    pub(crate) fn lapsed(&self, now: Instant) -> bool {
        self.ticket.heartbeat.is_none() && self.ticket.lapses_at.is_some_and(|at| now >= at)
    }

    /// Lets go of a message whose visibility lapsed before it was handed out (see
    /// [`lapsed`](Self::lapsed)): no call, and counted apart from the deliveries dropped
    /// unsettled.
    pub(crate) fn let_lapse(mut self) {
        let queue = &self.ticket.queue;
        debug!(queue = %queue.name, message_id = %self.ticket.message_id, "the message's visibility lapsed before it was handed out; SQS hands it out again");
        queue.metrics.lapsed();
        queue.metrics.in_flight(-1.0);
        // Not settled, but let go knowingly: the drop counts it no further.
        self.ticket.settled = true;
    }

    /// The delivery, unless its visibility lapsed by `now` (see [`lapsed`](Self::lapsed)): then
    /// it is let go ([`let_lapse`](Self::let_lapse)) and `None` returned.
    pub(crate) fn unless_lapsed(self, now: Instant) -> Option<Self> {
        if self.lapsed(now) {
            self.let_lapse();
            None
        } else {
            Some(self)
        }
    }

    /// Gives the delivery its FIFO group's turn: settling it passes the turn on.
    pub(crate) fn take_turn(&mut self, turn: Turn) {
        self.ticket.turn = Some(turn);
    }

    /// Until when a consumer that returned this message for order at `back_at` waits for it to
    /// come back before handing out later messages of its group: a visibility timeout after it
    /// is visible again (by then another consumer has it, or it went to the dead-letter queue).
    pub(crate) fn returned_until(&self, back_at: Instant) -> Instant {
        back_at.max(Instant::now())
            + Duration::from_secs(1)
            + Duration::from_secs(u64::from(self.ticket.queue.visibility_timeout))
    }

    /// Returns the message to the queue because an earlier message of its FIFO group comes
    /// back at `back_at`: handling it now would break the group's order. It is hidden until
    /// then, and for at least a second (SQS's unit of visibility): SQS itself holds a group
    /// back while any of its messages is hidden, but an emulator that does not (LocalStack
    /// hands a group out again as soon as one of its messages is returned) would otherwise
    /// give the rest of the group to concurrent receives in any order, or before the message.
    pub(crate) fn return_for_order(self, back_at: Instant) {
        self.ticket.queue.metrics.returned_for_order();
        let delay = back_at
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        self.ticket.settle_detached(Outcome::RetryAfter(delay));
    }

    /// The message.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The message, to put in place what its receive only pointed to.
    #[cfg(feature = "s3")]
    pub(crate) fn message_mut(&mut self) -> &mut Message {
        &mut self.message
    }

    /// Runs `hook` once SQS confirms that the message is deleted (acked, or dropped short of
    /// the dead-letter queue); not when it stays in the queue, goes to the dead-letter queue,
    /// or its delete fails.
    #[cfg(feature = "s3")]
    pub(crate) fn after_delete(&mut self, hook: AfterDelete) {
        self.ticket.after_delete = Some(hook);
    }

    /// The span to process the message in, as the engine's handlers run in theirs: a
    /// `message` span at INFO, of OpenTelemetry's consumer kind, with the messaging fields and
    /// the message's trace context (with the `opentelemetry` feature, the sender's span as its
    /// parent). A new span each call: make it once per delivery.
    pub fn span(&self) -> tracing::Span {
        message_span(&self.ticket.queue.name, &self.message)
    }

    /// Settles the message with `outcome`. See [`Ticket::settle`].
    pub fn settle(self, outcome: Outcome) -> Settlement {
        self.ticket.settle(outcome)
    }

    /// Settles the message with `outcome`, for a caller that does not wait for the answer.
    pub(crate) fn settle_detached(self, outcome: Outcome) {
        self.ticket.settle_detached(outcome);
    }

    pub(crate) fn queue(&self) -> &Arc<QueueRuntime> {
        &self.ticket.queue
    }

    /// Splits the delivery into the message, for a handler to own, and the ticket that settles
    /// it.
    pub fn into_parts(self) -> (Message, Ticket) {
        (self.message, self.ticket)
    }
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("queue", &&*self.ticket.queue.name)
            .field("message_id", &self.message.id())
            .field("receive_count", &self.message.receive_count())
            .finish_non_exhaustive()
    }
}

/// The right to settle one delivery: its receipt handle and its place in the engine.
///
/// Dropped unsettled, it makes no call: the heartbeat stops extending it, and the message comes
/// back when its current visibility timeout lapses. Dropping never awaits.
pub struct Ticket {
    receipt: Arc<str>,
    message_id: Arc<str>,
    receive_count: u32,
    /// The end of the 12 hours from the receive: no visibility may reach past it.
    window_end: Instant,
    /// Until when the message is known to stay invisible, as of the receive.
    visible_until: Instant,
    /// When the message is visible again for sure unless extended: a visibility timeout after
    /// the receive's answer; `None` with a timeout of zero.
    lapses_at: Option<Instant>,
    /// The delivery's key in the heartbeat's schedule.
    heartbeat: Option<u64>,
    queue: Arc<QueueRuntime>,
    /// The delivery's place among the messages the engine may hold; freed when its settlement
    /// is answered, or when it is dropped unsettled.
    slot: Option<Slot>,
    /// Its message's room among the bytes held (body and message attributes): freed when it
    /// is settled (its handler is done with the message) or dropped.
    body: Option<BodyRoom>,
    /// Its FIFO group's turn, when it has it.
    turn: Option<Turn>,
    /// Its FIFO group, for a batch handler's order check.
    group: Option<Arc<str>>,
    settled: bool,
    /// What runs once SQS confirms the message's delete.
    after_delete: Option<AfterDelete>,
    /// Keeps the queue's settlement open until the ticket is settled (its entry queued) or
    /// dropped: declared last, so it goes after everything else.
    _hold: Hold,
}

impl Ticket {
    /// The message id.
    pub fn message_id(&self) -> &str {
        &self.message_id
    }

    /// The receive count of this delivery, the first delivery counting as one.
    pub fn receive_count(&self) -> u32 {
        self.receive_count
    }

    /// Settles the message with `outcome`: queues its entry for the next batch call of its
    /// kind, and returns the answer to come.
    ///
    /// [`Outcome::Drop`] deletes, except at the last receive the engine's redrive policy
    /// allows, where it returns the message (visibility 0) so that SQS moves it to the
    /// dead-letter queue. [`Outcome::RetryAfter`] counts whole seconds rounded up and is
    /// shortened, with a warning, to end within 12 hours of the receive.
    ///
    /// # Cancel safety
    ///
    /// The entry is queued before this returns. Dropping the [`Settlement`] does not withdraw
    /// it: it is sent all the same, and only its answer is lost.
    pub fn settle(mut self, outcome: Outcome) -> Settlement {
        let (request, turn) = self.request(outcome);
        let settlement = settle::enqueue(&self.queue.settler, request);
        pass_turn(turn);
        settlement
    }

    /// Settles the message with `outcome` as [`settle`](Self::settle) does, for a caller that
    /// does not wait for the answer: the flusher records and logs it all the same.
    pub(crate) fn settle_detached(mut self, outcome: Outcome) {
        let (request, turn) = self.request(outcome);
        settle::enqueue_detached(&self.queue.settler, request);
        pass_turn(turn);
    }

    /// The FIFO group of the message, when it has one and the engine keeps its order.
    pub(crate) fn group(&self) -> Option<&Arc<str>> {
        self.group.as_ref()
    }

    /// Marks the ticket settled and makes the entry for `outcome`, as [`plan`] decides it.
    /// A FIFO group's turn passes on with SQS's answer (hooked to the entry), or, when the
    /// group does not wait for the answer, right after the entry is queued: then it comes back
    /// with whether the message is deleted, for the caller to pass on.
    fn request(&mut self, outcome: Outcome) -> (Request, Option<(Turn, Fate)>) {
        self.settled = true;
        let queue = &self.queue;
        let plan = plan(
            outcome,
            self.receive_count,
            queue.max_receive_count,
            self.window_end,
            Instant::now(),
        );
        if plan.redrive {
            queue.metrics.redrive();
            debug!(queue = %queue.name, message_id = %self.message_id, receive_count = self.receive_count, "drop at the redrive cap: returning the message for the dead-letter queue");
        }
        if plan.shortened {
            warn!(
                queue = %queue.name,
                message_id = %self.message_id,
                requested = ?plan.visibility.map(|target| target.delay),
                "retry_after reaches past 12 hours from the receive; shortened to end there"
            );
        }
        // When the message is back in the queue, if it does not go: at once, after its
        // retry_after, or (a failed delete) when its visibility lapses.
        let now = Instant::now();
        let fate = match plan.visibility {
            None => Fate::Deleted,
            Some(target) => {
                Fate::BackAt(now + Duration::from_secs(u64::from(target.seconds_at(now).0)))
            }
        };
        let (on_turn, turn) = match self.turn.take() {
            Some(turn) if turn.waits_for_answer() => (Some(turn), None),
            Some(turn) => (None, Some((turn, fate))),
            None => (None, None),
        };
        let after_delete = self
            .after_delete
            .take()
            .filter(|_| matches!(fate, Fate::Deleted));
        let on_answer = (on_turn.is_some() || after_delete.is_some()).then(|| {
            AnswerHook(Box::new(move |applied, visible_until| {
                if let Some(turn) = on_turn {
                    turn.end(if applied {
                        fate
                    } else {
                        Fate::BackAt(visible_until)
                    });
                }
                if let Some(hook) = after_delete.filter(|_| applied) {
                    hook();
                }
            }))
        });
        self.body = None;
        let request = Request {
            receipt: Arc::clone(&self.receipt),
            outcome,
            lane: plan.lane,
            visibility: plan.visibility,
            message_id: Arc::clone(&self.message_id),
            key: self.heartbeat.take(),
            visible_until: self.visible_until,
            slot: self.slot.take(),
            on_answer,
        };
        (request, turn)
    }
}

/// What runs once SQS confirms a message's delete (see [`Delivery::after_delete`]).
pub(crate) type AfterDelete = Box<dyn FnOnce() + Send + Sync>;

/// The FIFO group of `message`, on a FIFO queue.
fn queue_fifo_group(queue: &QueueRuntime, message: &Message) -> Option<Arc<str>> {
    if queue.fifo {
        message.group_id().map(Arc::from)
    } else {
        None
    }
}

/// Passes a FIFO group's turn on, once the entry of its message is queued.
fn pass_turn(turn: Option<(Turn, Fate)>) {
    if let Some((turn, fate)) = turn {
        turn.end(fate);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let deadline = self
            .heartbeat
            .take()
            .and_then(|key| self.queue.settler.forget(key));
        if let Some(turn) = self.turn.take() {
            // Unsettled: the message comes back when its visibility lapses, and the rest of
            // its group no earlier.
            turn.end(Fate::BackAt(deadline.unwrap_or(self.visible_until)));
        }
        if !self.settled {
            self.queue.metrics.in_flight(-1.0);
            self.queue.metrics.unsettled();
            debug!(
                queue = %self.queue.name,
                message_id = %self.message_id,
                "delivery dropped unsettled; it comes back when its visibility lapses"
            );
        }
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("queue", &&*self.queue.name)
            .field("message_id", &&*self.message_id)
            .field("receive_count", &self.receive_count)
            .finish_non_exhaustive()
    }
}

/// Returns messages received but not handed out to the queue at once (the caller counts them
/// out of the prefetch).
pub(crate) fn return_all(queue: &QueueRuntime, deliveries: Vec<Delivery>) {
    if deliveries.is_empty() {
        return;
    }
    info!(queue = %queue.name, messages = deliveries.len(), "returning messages not started");
    for delivery in deliveries {
        delivery.settle_detached(Outcome::Retry);
    }
}
