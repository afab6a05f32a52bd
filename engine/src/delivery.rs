//! A received message and the right to settle it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::api::ReceivedMessage;
use crate::message::Message;
use crate::outcome::Outcome;
use crate::queue::QueueRuntime;
use crate::settle::coalescer::Lane;
use crate::settle::visibility::{MAX_VISIBILITY, VisibilityTarget};
use crate::settle::{self, Request, Settlement};

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
        slot: Option<OwnedSemaphorePermit>,
        called_at: Instant,
    ) -> Self {
        let (message, receipt) = Message::from_received(received);
        let visible_until = called_at + Duration::from_secs(u64::from(queue.visibility_timeout));
        let receipt: Arc<str> = Arc::from(receipt);
        let message_id: Arc<str> = Arc::from(message.id());
        let window_end = called_at + MAX_VISIBILITY;
        let at_last_receive = queue
            .max_receive_count
            .is_some_and(|cap| message.receive_count() >= cap);
        queue
            .metrics
            .delivered(message.receive_count(), at_last_receive);
        queue.metrics.in_flight(1.0);
        let heartbeat = queue.heartbeat.as_ref().map(|heartbeat| {
            heartbeat.register(
                Arc::clone(&receipt),
                Arc::clone(&message_id),
                visible_until,
                window_end,
            )
        });
        let ticket = Ticket {
            receipt,
            message_id,
            receive_count: message.receive_count(),
            window_end,
            visible_until,
            heartbeat,
            queue,
            slot,
            settled: false,
        };
        Self { message, ticket }
    }

    /// The message.
    pub fn message(&self) -> &Message {
        &self.message
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
    /// The delivery's key in the heartbeat's schedule.
    heartbeat: Option<u64>,
    queue: Arc<QueueRuntime>,
    /// The delivery's place among the messages the engine may hold; freed when its settlement
    /// is answered, or when it is dropped unsettled.
    slot: Option<OwnedSemaphorePermit>,
    settled: bool,
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
        let request = self.request(outcome);
        settle::enqueue(&self.queue, request)
    }

    /// Settles the message with `outcome` as [`settle`](Self::settle) does, for a caller that
    /// does not wait for the answer: the flusher records and logs it all the same.
    pub(crate) fn settle_detached(mut self, outcome: Outcome) {
        let request = self.request(outcome);
        settle::enqueue_detached(&self.queue, request);
    }

    /// Marks the ticket settled and makes the entry for `outcome`.
    fn request(&mut self, outcome: Outcome) -> Request {
        self.settled = true;
        let slot = self.slot.take();
        let visible_until = self.stop_heartbeat().unwrap_or(self.visible_until);
        let queue = &self.queue;
        let at_cap = queue
            .max_receive_count
            .is_some_and(|cap| self.receive_count >= cap);
        let (lane, delay) = match outcome {
            Outcome::Ack => (Lane::Delete, None),
            Outcome::Drop if at_cap => {
                queue.metrics.redrive();
                debug!(queue = %queue.name, message_id = %self.message_id, receive_count = self.receive_count, "drop at the redrive cap: returning the message for the dead-letter queue");
                (Lane::Visibility, Some(Duration::ZERO))
            }
            Outcome::Drop => (Lane::Delete, None),
            Outcome::Retry => (Lane::Visibility, Some(Duration::ZERO)),
            Outcome::RetryAfter(delay) => (Lane::Visibility, Some(delay)),
        };
        let visibility = delay.map(|delay| VisibilityTarget {
            delay,
            window_end: self.window_end,
        });
        if let Some(target) = visibility {
            let (seconds, shortened) = target.seconds_at(Instant::now());
            if shortened {
                warn!(
                    queue = %queue.name,
                    message_id = %self.message_id,
                    requested = ?target.delay,
                    seconds,
                    "retry_after reaches past 12 hours from the receive; shortened to end there"
                );
            }
        }
        Request {
            receipt: Arc::clone(&self.receipt),
            outcome,
            lane,
            visibility,
            message_id: Arc::clone(&self.message_id),
            visible_until,
            slot,
        }
    }

    /// Stops the heartbeat for this delivery; returns its deadline as last extended.
    fn stop_heartbeat(&mut self) -> Option<Instant> {
        let key = self.heartbeat.take()?;
        self.queue.heartbeat.as_ref()?.deregister(key)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.stop_heartbeat();
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
