//! The messages of one queue and where each stands, indexed so that no call scans the queue.
//!
//! Each message is in one of three states: visible (its sequence number waits in a FIFO of
//! visible messages), in flight after a receive, or delayed after a send with a delay. The last
//! two have a deadline, kept in an ordered set of `(deadline, sequence number)`; a message
//! whose deadline has passed is moved back to the visible FIFO by the next call on the queue
//! ([`Messages::release_due`]), so no background task is needed, and a long poll sleeps until
//! the earliest deadline at most. A receive therefore costs O(messages received + deadlines
//! passed), never a scan of the queue. A message deleted while visible leaves its number in the
//! FIFO; the number is skipped when it comes up.
//!
//! On a FIFO queue the messages are kept by group as well: a receive hands out a group's
//! messages in send order, never one while an earlier message of its group is in flight, and
//! may hand out several consecutive messages of one group; it walks the groups whose oldest
//! message is oldest first (O(groups) per receive). Standard queues never touch this state.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::error::{ErrorKind, ModelError};

/// Hashes message sequence numbers with one multiplication (Fibonacci hashing), which spreads
/// consecutive numbers over the whole hash. Sequence numbers are the model's own, so no
/// protection against chosen keys is needed.
#[derive(Debug, Default, Clone, Copy)]
struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*byte)).wrapping_mul(FIBONACCI);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(FIBONACCI);
    }
}

/// 2^64 divided by the golden ratio, odd.
const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;

/// A map keyed by message sequence number.
type SeqMap<V> = HashMap<u64, V, BuildHasherDefault<SeqHasher>>;

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
    /// Receivable; its number is in the visible FIFO (or its group's pending ones).
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
    /// Where it stands.
    visibility: Visibility,
}

/// How many messages of a queue stand where, exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counts {
    /// Receivable (on a FIFO queue, including those held behind their group).
    pub visible: usize,
    /// Received, and neither deleted nor visible again.
    pub in_flight: usize,
    /// Sent with a delay that has not passed.
    pub delayed: usize,
}

/// One receive of a message.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Received<M> {
    /// What the front keeps of the message.
    pub data: M,
    /// The message's sequence number in its queue.
    pub seq: u64,
    /// Its receive count, this receive included: with `seq`, what names this receive.
    pub receive_count: u32,
    /// When it was first received, in epoch milliseconds.
    pub first_receive_millis: u64,
}

/// The messages of one queue; `M` is what a front keeps of each (body, attributes, digests).
#[derive(Debug)]
pub struct Messages<M> {
    /// The sequence number of the next message.
    next_seq: u64,
    /// The messages, by sequence number.
    messages: SeqMap<Stored<M>>,
    /// Sequence numbers of visible messages of a standard queue, oldest first; may hold
    /// numbers of messages deleted since, which are skipped.
    visible: VecDeque<u64>,
    /// Deadlines of in-flight and delayed messages.
    deadlines: BTreeSet<(Instant, u64)>,
    /// How many messages stand where.
    counts: Counts,
    /// A FIFO queue's groups, by id; `None` on a standard queue.
    groups: Option<HashMap<Arc<str>, Group>>,
}

impl<M: Clone> Messages<M> {
    /// No messages, of a FIFO queue or of a standard one.
    pub fn new(fifo: bool) -> Self {
        Self {
            next_seq: 0,
            messages: SeqMap::default(),
            visible: VecDeque::new(),
            deadlines: BTreeSet::new(),
            counts: Counts::default(),
            groups: fifo.then(HashMap::new),
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

    /// Stores a message sent `now` with `delay` (on a FIFO queue, in `group`; the empty group
    /// when none); its sequence number.
    pub fn store(
        &mut self,
        data: M,
        group: Option<Arc<str>>,
        now: Instant,
        delay: Duration,
    ) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let group = match self.groups.as_mut() {
            Some(groups) => {
                let group = group.unwrap_or_else(|| Arc::from(""));
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
                self.visible.push_back(seq);
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
                data,
                group,
                receive_count: 0,
                first_receive_millis: None,
                visibility,
            },
        );
        seq
    }

    /// Receives visible messages into `out` until it holds `max`, each made invisible until
    /// `deadline`; `now_millis` is the wall-clock time of a first receive.
    pub fn receive(
        &mut self,
        now: Instant,
        deadline: Instant,
        now_millis: u64,
        max: usize,
        out: &mut Vec<Received<M>>,
    ) {
        self.release_due(now);
        if self.groups.is_some() {
            self.receive_fifo(deadline, now_millis, max, out);
            return;
        }
        while out.len() < max {
            let Some(seq) = self.visible.pop_front() else {
                break;
            };
            self.hand_out(seq, deadline, now_millis, out);
        }
    }

    /// A FIFO queue's receive: the groups with no message in flight, oldest first message
    /// first, each handing out its consecutive visible messages from the oldest.
    fn receive_fifo(
        &mut self,
        deadline: Instant,
        now_millis: u64,
        max: usize,
        out: &mut Vec<Received<M>>,
    ) {
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
            let pending: Vec<u64> = match self.groups.as_ref().and_then(|g| g.get(&name)) {
                Some(group) => group.pending.iter().copied().collect(),
                None => continue,
            };
            for seq in pending {
                if out.len() >= max || !self.hand_out(seq, deadline, now_millis, out) {
                    break;
                }
            }
            if out.len() >= max {
                break;
            }
        }
    }

    /// Hands out message `seq` into `out` when it is visible, in flight until `deadline`;
    /// whether it was.
    fn hand_out(
        &mut self,
        seq: u64,
        deadline: Instant,
        now_millis: u64,
        out: &mut Vec<Received<M>>,
    ) -> bool {
        let Some(stored) = self.messages.get_mut(&seq) else {
            return false;
        };
        if stored.visibility != Visibility::Visible {
            return false;
        }
        stored.receive_count = stored.receive_count.saturating_add(1);
        let first_receive_millis = *stored.first_receive_millis.get_or_insert(now_millis);
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
        self.deadlines.insert((deadline, seq));
        self.counts.visible -= 1;
        self.counts.in_flight += 1;
        true
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
                self.visible.push_back(seq);
            }
            self.counts.visible += 1;
        }
    }

    /// Deletes message `seq` when `receive_count` names its latest receive: what the front
    /// kept of it. `None` for a stale receive (the message was received again since, or is
    /// gone), which deletes nothing.
    pub fn delete(&mut self, seq: u64, receive_count: u32) -> Option<M> {
        match self.messages.get(&seq) {
            Some(stored) if stored.receive_count == receive_count => self.remove(seq),
            _ => None,
        }
    }

    /// Makes message `seq` (its receive `receive_count`, the latest) visible `timeout` after
    /// `now`; whether that is sooner than it was going to be.
    ///
    /// # Errors
    ///
    /// `ReceiptHandleIsInvalid` for a stale receive; `MessageNotInflight` when the message is
    /// visible again.
    pub fn change_visibility(
        &mut self,
        seq: u64,
        receive_count: u32,
        now: Instant,
        timeout: Duration,
    ) -> Result<bool, ModelError> {
        self.release_due(now);
        let stored = match self.messages.get_mut(&seq) {
            Some(stored) if stored.receive_count == receive_count => stored,
            _ => {
                return Err(ModelError::new(
                    ErrorKind::ReceiptHandleIsInvalid,
                    "the receipt handle is not the latest of a message in the queue (deleted, \
                     or received again since)",
                ));
            }
        };
        let Visibility::InFlight(old) = stored.visibility else {
            return Err(ModelError::new(
                ErrorKind::MessageNotInflight,
                "the message is not in flight",
            ));
        };
        let deadline = now + timeout;
        stored.visibility = Visibility::InFlight(deadline);
        self.deadlines.remove(&(old, seq));
        self.deadlines.insert((deadline, seq));
        Ok(deadline < old)
    }

    /// Deletes every message.
    pub fn purge(&mut self) {
        self.messages = SeqMap::default();
        self.visible = VecDeque::new();
        self.deadlines.clear();
        self.counts = Counts::default();
        if let Some(groups) = self.groups.as_mut() {
            groups.clear();
        }
    }

    /// Removes message `seq`, wherever it stands; what the front kept of it.
    fn remove(&mut self, seq: u64) -> Option<M> {
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
            // Its number stays in the visible FIFO, to be skipped.
            Visibility::Visible => self.counts.visible -= 1,
            Visibility::InFlight(deadline) => {
                self.deadlines.remove(&(deadline, seq));
                self.counts.in_flight -= 1;
            }
            Visibility::Delayed(deadline) => {
                self.deadlines.remove(&(deadline, seq));
                self.counts.delayed -= 1;
            }
        }
        self.compact();
        Some(stored.data)
    }

    /// Gives back the memory of a large backlog once it is consumed, and keeps the visible
    /// FIFO from filling up with numbers of messages deleted while visible.
    fn compact(&mut self) {
        if self.messages.is_empty() && self.messages.capacity() > 4096 {
            self.messages.shrink_to_fit();
            self.visible.clear();
            self.visible.shrink_to_fit();
            return;
        }
        if self.visible.len() > 64 && self.visible.len() > 2 * self.counts.visible {
            let messages = &self.messages;
            self.visible.retain(|seq| {
                messages
                    .get(seq)
                    .is_some_and(|stored| stored.visibility == Visibility::Visible)
            });
        }
    }

    /// How many numbers the visible FIFO holds, skipped ones included (for tests of its
    /// compaction).
    pub fn visible_fifo_len(&self) -> usize {
        self.visible.len()
    }
}
