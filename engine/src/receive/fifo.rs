//! Order on a FIFO queue: one message of a group at a time, in receive order, with every
//! worker free to take other groups.
//!
//! SQS hands out the messages of a group in order and holds the group back while any of them is
//! in flight, but one receive can carry several messages of the same group. The [`Gate`] keeps
//! the order from there: of each group, only the oldest message received is handed out (its
//! *turn*); the next waits, kept invisible by the heartbeat like any held message, until the
//! turn ends:
//!
//! - the turn's message was deleted (ack, or a drop below the redrive cap): the next message of
//!   its group is handed out. With [`FifoOrder::Confirmed`] (the default) this is when SQS has
//!   confirmed the delete; with [`FifoOrder::Outcome`], as soon as the handler returned (the
//!   delete is sent first, in the same or an earlier batch call, but a delete that then fails
//!   lets its message come back after the next one);
//! - anything else (retry, retry_after, a drop returned for the dead-letter queue, a delivery
//!   dropped unsettled, a failed delete): the message comes back to the queue, so the rest of its
//!   group received with it goes back too, hidden until the message is back and for at least a
//!   second (counted as returned for order), and SQS hands them out again after it.
//!
//! Each return is a receive toward the redrive policy's cap, and SQS's order allows no way
//! around it: the rest of a group was received with its earlier message every time, so no more
//! often. When that message goes back after its last allowed receive, those of the rest
//! received as often go to the dead-letter queue with it at the next receive (handled before,
//! they would start while it is still on the queue; held, they would keep SQS from ever handing
//! it out again to move it). That receive unblocks the group: the messages received fewer
//! times, sent later, are handled.
//!
//! The gate also remembers, for a while, the sequence numbers it returned (not those at their
//! last allowed receive: they never come back): a later message of the group that arrives
//! before them goes back as well. SQS never needs this: it hands out no later message of a
//! group while an earlier one is on the queue, save in the same receive, so on SQS a message
//! that arrives alone proves the earlier ones gone (another consumer took them), and the memory
//! only delays it. An emulator that hands a group out again while one of its messages is hidden
//! (LocalStack, once another of them is returned) is kept in order by it. What the gate owes
//! such an emulator stops short of the redrive policy: it returns a later message only while
//! the receive that brings it back leaves it one more before the cap, so one returned this way
//! is still handled, even after going back once more with the rest of its group; past that it
//! is handled at once, out of the emulator's order if need be. The memory is swept of what
//! waited past its time, and bounded (see [`GateState::remember`]).
//!
//! Standard queues have no gate: nothing here runs for them.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::debug;

use crate::receive::delivery::Delivery;
use crate::receive::turn::{Fate, Turn, TurnKeeper};

/// When the next message of a FIFO group may start. See [`EngineBuilder::fifo_order`](crate::EngineBuilder::fifo_order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FifoOrder {
    /// Once SQS has confirmed the previous message's delete: one settlement round trip per
    /// message of a group, and a failed delete stops the group instead of reordering it. The
    /// default: a FIFO queue is chosen for its order.
    #[default]
    Confirmed,
    /// As soon as the previous message's handler returned `Ack` (or `Drop`): the delete is
    /// queued first, so it goes out in the same or an earlier batch call, but should it fail,
    /// its message comes back after the next one. Faster when a group's messages follow each
    /// other closely.
    Outcome,
}

/// The group gate of one FIFO queue's consumer.
pub(crate) struct Gate {
    state: Mutex<GateState>,
    /// Signalled when a delivery becomes ready.
    ready: Notify,
    order: FifoOrder,
}

#[derive(Default)]
struct GateState {
    /// The groups with a turn under way (or a delivery ready), and the deliveries of each
    /// waiting behind it, in receive order. Ordered by group, so that what a stopping consumer
    /// returns goes back in the same order every time.
    groups: BTreeMap<Arc<str>, VecDeque<Delivery>>,
    /// Deliveries whose turn it is, in receive order, not yet handed out.
    ready: VecDeque<Delivery>,
    /// Per group, the sequence numbers of the messages returned for order and not received
    /// again yet, each with when to stop waiting for it (another consumer may have taken it).
    /// At most [`REMEMBERED_GROUPS`] groups: see [`GateState::remember`].
    returned: HashMap<Arc<str>, BTreeMap<u128, Instant>>,
    /// How many groups `returned` may hold before the next sweep.
    sweep_at: usize,
}

/// The most groups whose returned messages the gate remembers. Past it, the groups it would
/// stop waiting for soonest are forgotten: the memory only keeps an emulator's order (see the
/// module doc), and a group forgotten only loses that.
const REMEMBERED_GROUPS: usize = 10_000;

/// The fewest groups `returned` holds before it is swept of what waited past its time.
const SWEEP_AT_LEAST: usize = 64;

impl GateState {
    /// Whether a message of `group` at `sequence` comes too early: an earlier message of its
    /// group was returned for order and has not come back. Forgets `sequence` itself as
    /// returned (it is back) and what has waited past its time.
    fn premature(&mut self, group: &Arc<str>, sequence: Option<u128>, now: Instant) -> bool {
        let Some(returned) = self.returned.get_mut(group) else {
            return false;
        };
        returned.retain(|_, until| *until > now);
        let premature = sequence.is_some_and(|sequence| {
            returned.remove(&sequence);
            returned.range(..sequence).next().is_some()
        });
        if returned.is_empty() {
            self.returned.remove(group);
        }
        premature
    }

    /// Remembers that the message of `group` at `sequence` was returned for order, until
    /// `until`. A group whose messages never come back (another consumer took them) is swept
    /// once its time has passed, by a sweep each time the groups remembered double (at least
    /// [`SWEEP_AT_LEAST`]): amortised, a constant cost per message. And the groups remembered
    /// never pass [`REMEMBERED_GROUPS`]: a sweep that leaves more forgets those it would stop
    /// waiting for soonest, down to three quarters of it.
    fn remember(&mut self, group: &Arc<str>, sequence: u128, until: Instant, now: Instant) {
        self.returned
            .entry(Arc::clone(group))
            .or_default()
            .insert(sequence, until);
        if self.returned.len() > self.sweep_at {
            self.sweep(now);
        }
    }

    /// Forgets what waited past its time, and the groups past [`REMEMBERED_GROUPS`].
    fn sweep(&mut self, now: Instant) {
        self.returned.retain(|_, returned| {
            returned.retain(|_, until| *until > now);
            !returned.is_empty()
        });
        if self.returned.len() > REMEMBERED_GROUPS {
            let mut ends: Vec<(Instant, Arc<str>)> = self
                .returned
                .iter()
                .map(|(group, returned)| {
                    let last = returned.values().max().copied().unwrap_or(now);
                    (last, Arc::clone(group))
                })
                .collect();
            ends.sort_unstable();
            let excess = self.returned.len() - REMEMBERED_GROUPS * 3 / 4;
            for (_, group) in ends.into_iter().take(excess) {
                self.returned.remove(&group);
            }
        }
        self.sweep_at = (2 * self.returned.len()).clamp(SWEEP_AT_LEAST, REMEMBERED_GROUPS);
    }
}

impl Gate {
    pub(crate) fn new(order: FifoOrder) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::default(),
            ready: Notify::new(),
            order,
        })
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        // Plain data; nothing under the lock panics.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes in the deliveries of one receive, in order: each is ready when its group has no
    /// turn under way, and waits behind it otherwise. One that comes while an earlier message
    /// of its group, returned for order, has not come back yet goes back too, unless that
    /// would leave it no receive to spare before the redrive policy's cap: SQS never hands a
    /// group out of order, but an emulator may (LocalStack hands out the rest of a group while
    /// a message of it is hidden).
    pub(crate) fn admit(self: &Arc<Self>, mut deliveries: Vec<Delivery>) {
        deliveries.sort_by_key(|d| d.message().sequence_number());
        let now = Instant::now();
        let mut state = self.lock();
        let mut woke = false;
        let mut premature = Vec::new();
        let mut outdated = Vec::new();
        for mut delivery in deliveries {
            let Some(group) = delivery.message().group_id().map(Arc::<str>::from) else {
                // No group (not a FIFO message): nothing to keep in order.
                state.ready.push_back(delivery);
                woke = true;
                continue;
            };
            let sequence = delivery.message().sequence_number();
            // Returned only with a receive to spare (see the module doc): otherwise handled,
            // out of the emulator's order if need be, rather than dead-lettered unseen.
            if state.premature(&group, sequence, now) && spares_a_receive(&delivery) {
                if let Some(sequence) = sequence {
                    let until = delivery.returned_until(now);
                    state.remember(&group, sequence, until, now);
                }
                premature.push(delivery);
                continue;
            }
            let started_early = crate::defect!(FifoNextStartedEarly);
            if let Some(waiting) = state.groups.get_mut(&group)
                && !started_early
            {
                // The same message waiting from an earlier receive: its visibility lapsed and
                // SQS handed it out again, so only the newer receipt handle still counts.
                let id = delivery.message().id();
                let copy = waiting.iter().position(|other| other.message().id() == id);
                match copy {
                    Some(at)
                        if waiting[at].message().receive_count()
                            < delivery.message().receive_count() =>
                    {
                        if let Some(older) = waiting.remove(at) {
                            outdated.push(older);
                        }
                        insert_in_order(waiting, delivery);
                    }
                    // The same receive again (a retried receive's answer): already waiting.
                    Some(_) => outdated.push(delivery),
                    None => insert_in_order(waiting, delivery),
                }
            } else {
                let turn = self.turn(&group, delivery.message().id());
                delivery.take_turn(turn);
                state.groups.entry(group).or_default();
                state.ready.push_back(delivery);
                woke = true;
            }
        }
        drop(state);
        if woke {
            self.ready.notify_one();
        }
        if !outdated.is_empty() {
            debug!(
                messages = outdated.len(),
                "dropping deliveries received again before their turn came"
            );
        }
        // Dropped unsettled: their receipt handles no longer count.
        drop(outdated);
        for delivery in premature {
            delivery.return_for_order(now);
        }
    }

    /// The next delivery whose turn it is, without waiting.
    pub(crate) fn pop_ready(&self) -> Option<Delivery> {
        self.lock().ready.pop_front()
    }

    /// Whether a delivery is ready to be handed out.
    pub(crate) fn has_ready(&self) -> bool {
        !self.lock().ready.is_empty()
    }

    /// Whether it holds nothing: no turn under way, nothing ready or waiting.
    pub(crate) fn is_empty(&self) -> bool {
        let state = self.lock();
        state.groups.is_empty() && state.ready.is_empty()
    }

    /// Waits until a delivery may be ready. Cancel safe.
    pub(crate) async fn readied(&self) {
        self.ready.notified().await;
    }

    /// Every delivery held, ready or waiting, for a consumer that stops: their turns end
    /// without handing out anything more.
    pub(crate) fn take_all(&self) -> Vec<Delivery> {
        let mut state = self.lock();
        state.returned.clear();
        let mut all: Vec<Delivery> = state.ready.drain(..).collect();
        for waiting in std::mem::take(&mut state.groups).into_values() {
            all.extend(waiting);
        }
        all
    }

    /// `group`'s turn, that of `message_id`, ended with `fate`. When its message is gone, the
    /// next of the group gets the turn. When it went back but is already received again
    /// (SQS applied the return and a receive took the message before its answer came here),
    /// that delivery is the message back, and has the turn. Otherwise the rest of the group
    /// goes back to the queue, to come back no earlier than the message itself.
    fn finish_turn(self: &Arc<Self>, group: &Arc<str>, message_id: &str, fate: Fate) {
        let mut state = self.lock();
        let Some(waiting) = state.groups.get_mut(group) else {
            return;
        };
        let next = match fate {
            Fate::Deleted => waiting.pop_front(),
            Fate::BackAt(_) => {
                let back_already = waiting
                    .front()
                    .is_some_and(|first| first.message().id() == message_id);
                if back_already {
                    waiting.pop_front()
                } else {
                    None
                }
            }
        };
        if let Some(mut next) = next {
            let turn = self.turn(group, next.message().id());
            next.take_turn(turn);
            state.ready.push_back(next);
            drop(state);
            self.ready.notify_one();
            return;
        }
        let back_at = match fate {
            Fate::Deleted => None,
            Fate::BackAt(at) => Some(at),
        };
        let rest = state.groups.remove(group).unwrap_or_default();
        if let Some(back_at) = back_at {
            let now = Instant::now();
            // One at its last allowed receive goes to the dead-letter queue at the next receive
            // that comes upon it: it never comes back, and nothing waits for it.
            for delivery in rest.iter().filter(|d| !at_last_receive(d)) {
                if let Some(sequence) = delivery.message().sequence_number() {
                    let until = delivery.returned_until(back_at);
                    state.remember(group, sequence, until, now);
                }
            }
        }
        drop(state);
        // A consumer waiting for the gate to empty may be done now.
        self.ready.notify_one();
        if let Some(back_at) = back_at
            && !rest.is_empty()
        {
            debug!(group = %group, messages = rest.len(), "the group's message comes back: returning the rest of the group to keep its order");
            for delivery in rest {
                delivery.return_for_order(back_at);
            }
        }
    }
}

/// Puts `delivery` among the waiting deliveries of its group by its `SequenceNumber`: receives
/// of one group arrive in order from SQS, which holds the group back while any of it is in
/// flight, but an emulator that hands a group out to concurrent receives (LocalStack does, once
/// a message of it becomes visible again) can have them arrive in either order. Without a
/// sequence number, it goes last.
fn insert_in_order(waiting: &mut VecDeque<Delivery>, delivery: Delivery) {
    let sequence = |d: &Delivery| d.message().sequence_number();
    let position = match sequence(&delivery) {
        Some(number) => waiting
            .iter()
            .rposition(|other| sequence(other).is_none_or(|other| other < number))
            .map_or(0, |before| before + 1),
        None => waiting.len(),
    };
    waiting.insert(position, delivery);
}

impl TurnKeeper for Gate {
    fn end_turn(self: Arc<Self>, group: &Arc<str>, message_id: &str, fate: Fate) {
        self.finish_turn(group, message_id, fate);
    }
}

impl Gate {
    /// The turn of `message_id` in `group`, ended through this gate.
    fn turn(self: &Arc<Self>, group: &Arc<str>, message_id: &str) -> Turn {
        Turn::new(
            Arc::clone(self) as Arc<dyn TurnKeeper>,
            Arc::clone(group),
            Arc::from(message_id),
            self.order == FifoOrder::Confirmed,
        )
    }
}

/// Whether `delivery` was received for the last time its queue's redrive policy allows: back
/// in the queue, it goes to the dead-letter queue at the next receive that comes upon it.
fn at_last_receive(delivery: &Delivery) -> bool {
    if crate::defect!(FifoWaitsForTheDeadLettered) {
        return false;
    }
    let cap = delivery.queue().max_receive_count;
    cap.is_some_and(|cap| delivery.message().receive_count() >= cap)
}

/// Whether `delivery` may be returned for an emulator's order and still be handled after:
/// the receive that brings it back leaves it at least one more before its queue's redrive
/// policy moves it to the dead-letter queue (one that the rest of a group going back with an
/// earlier message may take). Always without a redrive policy.
fn spares_a_receive(delivery: &Delivery) -> bool {
    if crate::defect!(FifoWaitsForTheDeadLettered) {
        return true;
    }
    let cap = delivery.queue().max_receive_count;
    cap.is_none_or(|cap| delivery.message().receive_count().saturating_add(1) < cap)
}

#[cfg(all(test, feature = "testing"))]
mod tests;
