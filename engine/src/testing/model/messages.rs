//! The messages of one queue and where each stands, indexed so that no call scans the queue.
//!
//! Each message is in one of three states: visible (its sequence number is in an ordered set
//! of visible messages), in flight after a receive, or delayed after a send with a delay. The
//! last two have a deadline, kept in an ordered set of `(deadline, sequence number)`; a
//! message whose deadline has passed is made visible again by the next call on the queue
//! ([`Messages::release_due`]), so no background task is needed, and a long poll sleeps until
//! the earliest deadline at most. A receive therefore costs O(log n) per message received or
//! deadline passed, never a scan of the queue.
//!
//! A standard queue hands out its visible messages oldest (first sent) first, a message made
//! visible again included: SQS documents best-effort ordering for standard queues, messages
//! "generally delivered in the same order as they're sent".
//!
//! On a FIFO queue the messages are kept by group as well: a receive hands out a group's
//! messages in send order, none while a message of its group is in flight, and as many
//! consecutive messages of one group as it can before the next group's (SQS "first attempts
//! to return as many messages with the same message group ID as possible"); it walks the
//! groups whose oldest message is oldest first (O(groups) per receive). Standard queues never
//! touch this state.
//!
//! With a redrive policy ([`Messages::set_max_receive_count`]), a receive that comes upon a
//! message already received `maxReceiveCount` times moves it out instead of handing it out, as
//! SQS moves it to the dead-letter queue; the front takes the moved messages with
//! [`Messages::take_redriven`] and stores them in the dead-letter queue
//! ([`Messages::store_redriven`]).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::error::{ErrorKind, ModelError};
use super::seq_map::SeqMap;
use super::views::{Counts, Message, Received, Redriven, Standing};
use crate::limits::MAX_VISIBILITY;

/// One message group of a FIFO queue.
#[derive(Debug, Default)]
struct Group {
    /// Its messages not deleted yet, in send order.
    pending: VecDeque<u64>,
    /// How many of them are in flight.
    in_flight: usize,
}

/// Where a stored message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Visibility {
    /// Receivable; its number is in the visible set (or its group's pending ones).
    Visible,
    /// Received, invisible until the deadline.
    InFlight(Instant),
    /// Sent with a delay, invisible until the deadline.
    Delayed(Instant),
}

/// A stored message.
#[derive(Debug)]
struct Stored<M> {
    /// What the front keeps of it.
    data: M,
    /// Its group, on a FIFO queue.
    group: Option<Arc<str>>,
    /// How many times it was received.
    receive_count: u32,
    /// When it was first received, in epoch milliseconds.
    first_receive_millis: Option<u64>,
    /// When its latest receive was: a visibility change may not hide it past
    /// [`MAX_VISIBILITY`] from then.
    received_at: Option<Instant>,
    /// The receive counts of earlier receives that still name it, because it was handed out
    /// again while they held it (a standard queue's duplicate delivery), until its next
    /// receive from visible.
    duplicated: Vec<u32>,
    /// Where it stands.
    visibility: Visibility,
}

/// What a receive did with one message it came upon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Handed it out.
    HandedOut,
    /// Moved it out by the redrive policy.
    Redriven,
    /// Left it: it is not visible.
    Held,
}

/// The terms of one receive, the same for every message it hands out.
#[derive(Debug, Clone, Copy)]
struct Lease {
    /// When the receive is made.
    now: Instant,
    /// Until when a message handed out stays in flight.
    deadline: Instant,
    /// The wall-clock time of the receive, for a message's first receive.
    now_millis: u64,
}

/// The messages of one queue; `M` is what a front keeps of each (body, attributes, digests).
#[derive(Debug)]
pub struct Messages<M> {
    /// The sequence number of the next message.
    next_seq: u64,
    /// The messages, by sequence number.
    messages: SeqMap<Stored<M>>,
    /// Sequence numbers of the visible messages of a standard queue.
    visible: BTreeSet<u64>,
    /// Deadlines of in-flight and delayed messages.
    deadlines: BTreeSet<(Instant, u64)>,
    /// How many messages stand where.
    counts: Counts,
    /// A FIFO queue's groups, by id; `None` on a standard queue.
    groups: Option<HashMap<Arc<str>, Group>>,
    /// The redrive policy's `maxReceiveCount`, when there is one.
    max_receive_count: Option<u32>,
    /// Messages receives moved out by the redrive policy, until the front takes them.
    redriven: Vec<Redriven<M>>,
}

impl<M: Clone> Messages<M> {
    /// No messages, of a FIFO queue or of a standard one.
    pub fn new(fifo: bool) -> Self {
        Self {
            next_seq: 0,
            messages: SeqMap::default(),
            visible: BTreeSet::new(),
            deadlines: BTreeSet::new(),
            counts: Counts::default(),
            groups: fifo.then(HashMap::new),
            max_receive_count: None,
            redriven: Vec::new(),
        }
    }

    /// The sequence number the next stored message gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// How many messages stand where, as of the last call that released what was due.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The earliest deadline of a message in flight or delayed: when a long poll that found
    /// nothing should look again.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(deadline, _)| *deadline)
    }

    /// Sets the redrive policy's `maxReceiveCount` (`None`: no policy): from now on a receive
    /// moves out a message received that many times instead of handing it out.
    pub fn set_max_receive_count(&mut self, max_receive_count: Option<u32>) {
        self.max_receive_count = max_receive_count;
    }

    /// Stores a message sent `now` with `delay` (on a FIFO queue, in `group`; the empty group
    /// when none); its sequence number.
    pub fn store(
        &mut self,
        data: M,
        group: Option<Arc<str>>,
        now: Instant,
        delay: Duration,
    ) -> u64 {
        self.insert(
            Redriven {
                data,
                group,
                receive_count: 0,
                first_receive_millis: None,
            },
            now,
            delay,
        )
    }

    /// Stores, visible at once, a message another queue's receive moved out by its redrive
    /// policy, with the receive count it had there; its sequence number.
    pub fn store_redriven(&mut self, redriven: Redriven<M>, now: Instant) -> u64 {
        self.insert(redriven, now, Duration::ZERO)
    }

    /// Stores a message, visible after `delay`.
    fn insert(&mut self, message: Redriven<M>, now: Instant, delay: Duration) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let group = match self.groups.as_mut() {
            Some(groups) => {
                let group = message.group.unwrap_or_else(|| Arc::from(""));
                groups
                    .entry(Arc::clone(&group))
                    .or_default()
                    .pending
                    .push_back(seq);
                Some(group)
            }
            None => None,
        };
        let visibility = if delay.is_zero() {
            if self.groups.is_none() {
                self.visible.insert(seq);
            }
            self.counts.visible += 1;
            Visibility::Visible
        } else {
            let deadline = now + delay;
            self.deadlines.insert((deadline, seq));
            self.counts.delayed += 1;
            Visibility::Delayed(deadline)
        };
        self.messages.insert(
            seq,
            Stored {
                data: message.data,
                group,
                receive_count: message.receive_count,
                first_receive_millis: message.first_receive_millis,
                received_at: None,
                duplicated: Vec::new(),
                visibility,
            },
        );
        seq
    }

    /// Receives visible messages into `out` until it holds `max`, each made invisible until
    /// `deadline`; `now_millis` is the wall-clock time of a first receive. A message the
    /// redrive policy moves out instead waits for [`take_redriven`](Self::take_redriven).
    pub fn receive(
        &mut self,
        now: Instant,
        deadline: Instant,
        now_millis: u64,
        max: usize,
        out: &mut Vec<Received<M>>,
    ) {
        self.release_due(now);
        let lease = Lease {
            now,
            deadline,
            now_millis,
        };
        if self.groups.is_some() {
            self.receive_fifo(&lease, max, out);
            return;
        }
        while out.len() < max {
            let Some(seq) = self.visible.first().copied() else {
                break;
            };
            if self.hand_out(seq, &lease, out) == Outcome::Held {
                // Not visible after all: the index is out of step; drop the number.
                self.visible.remove(&seq);
            }
        }
    }

    /// A FIFO queue's receive: the groups with no message in flight, oldest first message
    /// first, each handing out its consecutive visible messages from the oldest.
    fn receive_fifo(&mut self, lease: &Lease, max: usize, out: &mut Vec<Received<M>>) {
        let Some(groups) = self.groups.as_ref() else {
            return;
        };
        let mut ready: Vec<(u64, Arc<str>)> = groups
            .iter()
            .filter(|(_, group)| group.in_flight == 0)
            .filter_map(|(name, group)| Some((*group.pending.front()?, Arc::clone(name))))
            .collect();
        ready.sort_unstable_by_key(|(head, _)| *head);
        for (_, name) in ready {
            for seq in self.group_pending(&name) {
                if out.len() >= max || self.hand_out(seq, lease, out) == Outcome::Held {
                    break;
                }
            }
            if out.len() >= max {
                break;
            }
        }
    }

    /// The pending messages of group `name`, in send order.
    fn group_pending(&self, name: &str) -> Vec<u64> {
        self.groups
            .as_ref()
            .and_then(|groups| groups.get(name))
            .map(|group| group.pending.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Hands out message `seq` into `out` when it is visible, in flight for the `lease`, or
    /// moves it out when it spent its receives.
    fn hand_out(&mut self, seq: u64, lease: &Lease, out: &mut Vec<Received<M>>) -> Outcome {
        let Lease {
            now,
            deadline,
            now_millis,
        } = *lease;
        let Some(stored) = self.messages.get_mut(&seq) else {
            return Outcome::Held;
        };
        if stored.visibility != Visibility::Visible {
            return Outcome::Held;
        }
        if self
            .max_receive_count
            .is_some_and(|max| stored.receive_count >= max)
        {
            if let Some(stored) = self.remove(seq) {
                self.redriven.push(Redriven {
                    data: stored.data,
                    group: stored.group,
                    receive_count: stored.receive_count,
                    first_receive_millis: stored.first_receive_millis,
                });
            }
            return Outcome::Redriven;
        }
        stored.receive_count = stored.receive_count.saturating_add(1);
        let first_receive_millis = *stored.first_receive_millis.get_or_insert(now_millis);
        stored.received_at = Some(now);
        stored.duplicated.clear();
        stored.visibility = Visibility::InFlight(deadline);
        out.push(Received {
            data: stored.data.clone(),
            seq,
            receive_count: stored.receive_count,
            first_receive_millis,
        });
        if let (Some(groups), Some(group)) = (self.groups.as_mut(), &stored.group)
            && let Some(group) = groups.get_mut(group)
        {
            group.in_flight += 1;
        }
        self.visible.remove(&seq);
        self.deadlines.insert((deadline, seq));
        self.counts.visible -= 1;
        self.counts.in_flight += 1;
        Outcome::HandedOut
    }

    /// The sequence numbers of the messages in flight, soonest deadline first, as of the last
    /// call that released what was due (it visits every message in flight or delayed).
    pub fn in_flight_seqs(&self) -> Vec<u64> {
        self.deadlines
            .iter()
            .filter(|(deadline, seq)| {
                self.messages
                    .get(seq)
                    .is_some_and(|stored| stored.visibility == Visibility::InFlight(*deadline))
            })
            .map(|(_, seq)| *seq)
            .collect()
    }

    /// Hands message `seq`, in flight, out again on a standard queue, as SQS's at-least-once
    /// delivery may: a new receive (its count one more), while the receives that hold it keep
    /// naming it, so that any of them deletes it or changes its visibility. It stays hidden
    /// until `deadline` or its current deadline, whichever is later. `None` on a FIFO queue
    /// (which delivers exactly once) or when the message is not in flight.
    pub fn hand_out_again(
        &mut self,
        seq: u64,
        now: Instant,
        deadline: Instant,
        now_millis: u64,
    ) -> Option<Received<M>> {
        if self.groups.is_some() {
            return None;
        }
        let stored = self.messages.get_mut(&seq)?;
        let Visibility::InFlight(old) = stored.visibility else {
            return None;
        };
        let previous = stored.receive_count;
        stored.duplicated.push(previous);
        stored.receive_count = previous.saturating_add(1);
        stored.received_at = Some(now);
        let first_receive_millis = *stored.first_receive_millis.get_or_insert(now_millis);
        let deadline = deadline.max(old);
        stored.visibility = Visibility::InFlight(deadline);
        let received = Received {
            data: stored.data.clone(),
            seq,
            receive_count: stored.receive_count,
            first_receive_millis,
        };
        self.deadlines.remove(&(old, seq));
        self.deadlines.insert((deadline, seq));
        Some(received)
    }

    /// The messages receives moved out by the redrive policy since the last call, oldest
    /// first, for the front to store in the dead-letter queue.
    pub fn take_redriven(&mut self) -> Vec<Redriven<M>> {
        std::mem::take(&mut self.redriven)
    }

    /// Makes visible every in-flight or delayed message whose deadline is not after `now`.
    pub fn release_due(&mut self, now: Instant) {
        while let Some(&(deadline, seq)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            let Some(stored) = self.messages.get_mut(&seq) else {
                continue;
            };
            match stored.visibility {
                Visibility::InFlight(d) if d == deadline => {
                    self.counts.in_flight -= 1;
                    if let (Some(groups), Some(group)) = (self.groups.as_mut(), &stored.group)
                        && let Some(group) = groups.get_mut(group)
                    {
                        group.in_flight = group.in_flight.saturating_sub(1);
                    }
                }
                Visibility::Delayed(d) if d == deadline => self.counts.delayed -= 1,
                _ => continue,
            }
            stored.visibility = Visibility::Visible;
            if self.groups.is_none() {
                self.visible.insert(seq);
            }
            self.counts.visible += 1;
        }
    }

    /// Message `seq`, when the queue holds it.
    pub fn get(&self, seq: u64) -> Option<Message<'_, M>> {
        self.messages.get(&seq).map(|stored| view(seq, stored))
    }

    /// What the front keeps of message `seq`, to change, when the queue holds it.
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut M> {
        self.messages.get_mut(&seq).map(|stored| &mut stored.data)
    }

    /// Every message the queue holds, in no particular order (for inspection: it visits the
    /// whole queue).
    pub fn iter(&self) -> impl Iterator<Item = Message<'_, M>> {
        self.messages.iter().map(|(seq, stored)| view(*seq, stored))
    }

    /// Every message the queue holds, in send order (for inspection: it visits and sorts the
    /// whole queue).
    pub fn in_send_order(&self) -> Vec<Message<'_, M>> {
        let mut messages: Vec<Message<'_, M>> = self.iter().collect();
        messages.sort_unstable_by_key(|message| message.seq);
        messages
    }

    /// What the front keeps of every message, to change, in no particular order (it visits
    /// the whole queue).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut M> {
        self.messages.values_mut().map(|stored| &mut stored.data)
    }

    /// Calls `f` with each message a receive could hand out now, as of the last call that
    /// released what was due: every visible message of a standard queue; on a FIFO queue the
    /// consecutive visible messages from the oldest of each group with none in flight. Costs
    /// O(messages visited), plus O(groups) on a FIFO queue.
    pub fn for_each_receivable(&mut self, mut f: impl FnMut(u64, &mut M)) {
        let Some(groups) = self.groups.as_ref() else {
            for seq in &self.visible {
                if let Some(stored) = self.messages.get_mut(seq) {
                    f(*seq, &mut stored.data);
                }
            }
            return;
        };
        for group in groups.values().filter(|group| group.in_flight == 0) {
            for seq in &group.pending {
                match self.messages.get_mut(seq) {
                    Some(stored) if stored.visibility == Visibility::Visible => {
                        f(*seq, &mut stored.data);
                    }
                    _ => break,
                }
            }
        }
    }

    /// Deletes message `seq` when `receive_count` names its latest receive (or one that holds
    /// a duplicate of it): what the front kept of it. `None` for a stale receive (the message
    /// was received again since, or is gone), which deletes nothing.
    pub fn delete(&mut self, seq: u64, receive_count: u32) -> Option<M> {
        match self.messages.get(&seq) {
            Some(stored) if stored.names(receive_count) => {
                self.remove(seq).map(|stored| stored.data)
            }
            _ => None,
        }
    }

    /// Whether `receive_count` names the latest receive of message `seq` (or one it was handed
    /// out again after) and the message is still in flight from it, as of the last call that released what was due.
    pub fn in_flight(&self, seq: u64, receive_count: u32) -> bool {
        self.messages.get(&seq).is_some_and(|stored| {
            stored.names(receive_count) && matches!(stored.visibility, Visibility::InFlight(_))
        })
    }

    /// Makes message `seq` (its receive `receive_count`, the latest or one it was handed out
    /// again after) visible `timeout` after
    /// `now`; whether that is sooner than it was going to be.
    ///
    /// # Errors
    ///
    /// `ReceiptHandleIsInvalid` for a stale receive; `MessageNotInflight` when the message is
    /// visible again; `InvalidParameterValue` when the message would stay hidden past
    /// [`MAX_VISIBILITY`] (12 hours) from that receive, which SQS refuses.
    pub fn change_visibility(
        &mut self,
        seq: u64,
        receive_count: u32,
        now: Instant,
        timeout: Duration,
    ) -> Result<bool, ModelError> {
        self.release_due(now);
        let stored = match self.messages.get_mut(&seq) {
            Some(stored) if stored.names(receive_count) => stored,
            _ => {
                return Err(ModelError::new(
                    ErrorKind::ReceiptHandleIsInvalid,
                    "the receipt handle is not the latest of a message in the queue (deleted, \
                     or received again since)",
                ));
            }
        };
        let (Visibility::InFlight(old), Some(received_at)) =
            (stored.visibility, stored.received_at)
        else {
            return Err(ModelError::new(
                ErrorKind::MessageNotInflight,
                "the message is not in flight",
            ));
        };
        let deadline = now + timeout;
        if timeout > MAX_VISIBILITY || deadline > received_at + MAX_VISIBILITY {
            return Err(ModelError::new(
                ErrorKind::InvalidParameterValue,
                format!(
                    "a visibility timeout of {} s ends more than 12 hours after the receive",
                    timeout.as_secs()
                ),
            ));
        }
        stored.visibility = Visibility::InFlight(deadline);
        self.deadlines.remove(&(old, seq));
        self.deadlines.insert((deadline, seq));
        Ok(deadline < old)
    }

    /// Deletes every message.
    pub fn purge(&mut self) {
        self.messages = SeqMap::default();
        self.visible.clear();
        self.deadlines.clear();
        self.counts = Counts::default();
        if let Some(groups) = self.groups.as_mut() {
            groups.clear();
        }
    }

    /// Removes message `seq`, wherever it stands.
    fn remove(&mut self, seq: u64) -> Option<Stored<M>> {
        let stored = self.messages.remove(&seq)?;
        if let (Some(groups), Some(name)) = (self.groups.as_mut(), &stored.group)
            && let Some(group) = groups.get_mut(name)
        {
            if let Some(at) = group.pending.iter().position(|s| *s == seq) {
                group.pending.remove(at);
            }
            if matches!(stored.visibility, Visibility::InFlight(_)) {
                group.in_flight = group.in_flight.saturating_sub(1);
            }
            if group.pending.is_empty() {
                groups.remove(name);
            }
        }
        match stored.visibility {
            Visibility::Visible => {
                self.visible.remove(&seq);
                self.counts.visible -= 1;
            }
            Visibility::InFlight(deadline) => {
                self.deadlines.remove(&(deadline, seq));
                self.counts.in_flight -= 1;
            }
            Visibility::Delayed(deadline) => {
                self.deadlines.remove(&(deadline, seq));
                self.counts.delayed -= 1;
            }
        }
        if self.messages.is_empty() && self.messages.capacity() > 4096 {
            // Gives back the memory of a large backlog once it is consumed.
            self.messages.shrink_to_fit();
        }
        Some(stored)
    }

    /// How many sequence numbers the visible index of a standard queue holds (for tests that
    /// it holds only visible messages).
    pub fn visible_index_len(&self) -> usize {
        self.visible.len()
    }
}

impl<M> Stored<M> {
    /// Whether `receive_count` names a receive that holds the message: its latest, or one it
    /// was handed out again after.
    fn names(&self, receive_count: u32) -> bool {
        receive_count > 0
            && (self.receive_count == receive_count || self.duplicated.contains(&receive_count))
    }
}

/// `stored`, message `seq`, as a front looks at it.
fn view<M>(seq: u64, stored: &Stored<M>) -> Message<'_, M> {
    Message {
        seq,
        data: &stored.data,
        receive_count: stored.receive_count,
        duplicated: &stored.duplicated,
        standing: match stored.visibility {
            Visibility::Visible => Standing::Visible,
            Visibility::InFlight(_) => Standing::InFlight,
            Visibility::Delayed(_) => Standing::Delayed,
        },
    }
}
