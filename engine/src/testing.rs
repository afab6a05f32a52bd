//! An SQS that lives in the test process, for tests on a paused clock.
//!
//! [`InProcessSqs`] implements [`SqsApi`], so an [`Engine`](crate::Engine) (or, with the
//! `ruststream` feature, the RustStream broker's in-process mode) runs against it unchanged. It
//! keeps its time on tokio's clock: under `#[tokio::test(start_paused = true)]` a
//! `retry_after(60 s)` comes back after `tokio::time::advance(60 s)`, with no real waiting.
//!
//! It is a test double. It models what the engine relies on, and refuses what SQS refuses
//! there; correctness claims about SQS itself are proven against LocalStack.
//!
//! What it models:
//!
//! - Queues, standard and FIFO (by the `.fifo` suffix), created on first use: every queue a
//!   service names exists here, as it does on an account an operator provisioned.
//! - Send (one and batch) with the limits SQS checks: an empty body, characters SQS refuses,
//!   more than ten message attributes, an empty attribute value, more than 1 MiB per message
//!   or per batch, more than ten entries, a FIFO send without a group id, a deduplication id on
//!   a standard queue. A FIFO queue remembers deduplication ids for five minutes.
//! - Receive: at most ten messages, each with a fresh receipt handle, its
//!   `ApproximateReceiveCount`, `SentTimestamp`, and on FIFO queues `MessageGroupId`. A FIFO
//!   group with a message in flight hands out nothing more until that message is deleted or
//!   visible again.
//! - Visibility on tokio's clock: a received message is invisible until deleted, changed, or
//!   its timeout lapses; a change is refused past twelve hours from the receive, and for a
//!   message no longer in flight. Only the newest receipt handle of a message deletes it: an
//!   older one is answered with success and deletes nothing, as SQS does.
//! - With the `sns` feature, topics: a queue subscribed to a topic receives each message
//!   published to it, body and attributes as published (raw delivery), at once; see
//!   [`InProcessSqs::subscribe_to_topic`].
//! - The redrive policy: a message received `maxReceiveCount` times moves to the dead-letter
//!   queue when it is visible again, rather than on the next receive as SQS does it; nothing
//!   can tell the two apart from outside.
//!
//! - A journal, when made with [`InProcessSqs::journaled`]: every change it applied (a send, a
//!   receive, a delete, a visibility change, a move to the dead-letter queue), in order and with
//!   the time on tokio's clock, for a test to check what a consumer did from the queue's side
//!   rather than from the consumer's own counters.
//!
//! What it does not model: a long poll has no timer. A receive with a wait time waits until a
//! message is there, however long that takes (on a paused clock, a timer would move the clock
//! forward whenever the test idles). Throttling, outages, message retention and the
//! distributed "approximate" nature of standard queues (duplicates, reordering) are not
//! modelled: this double keeps the order messages were sent in. The fault-injection suite runs
//! against LocalStack for those.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::api::{
    BoxFuture, CallError, CallErrorKind, EntryFailure, EntryResult, QueueAttributes,
    ReceiveRequest, ReceivedMessage, SendEntry, SqsApi,
};
use crate::attribute::{AttributeValue, MessageAttribute};
use crate::bounded::{MaxReceiveCount, WaitTime};
use crate::decorator::SqsDecorator;
use crate::limits::MAX_VISIBILITY_SECS;
use crate::queue_url::last_segment;

#[cfg(feature = "sns")]
mod sns;

/// The account id in the queue URLs and ARNs this double hands out.
const ACCOUNT: &str = "000000000000";
/// The visibility timeout of a new queue, as on SQS.
const DEFAULT_VISIBILITY: u32 = 30;
/// The largest message, body and attributes together, and the largest batch.
const MAX_MESSAGE_BYTES: usize = 1_048_576;
/// How long a FIFO queue remembers a deduplication id.
const DEDUPLICATION_WINDOW: Duration = Duration::from_secs(300);
/// The most entries in one batch call, and the most messages one receive hands out.
const MAX_BATCH: usize = 10;
/// The most message attributes on one message.
const MAX_ATTRIBUTES: usize = 10;

/// What a test harness learns from the double: messages becoming receivable on a watched
/// queue, leaving it, and when to look again.
pub(crate) trait Observer: Send + Sync {
    /// One message became receivable on a watched queue.
    fn enqueued(&self);
    /// One message counted by [`enqueued`](Self::enqueued) is done with.
    fn consumed(&self);
    /// Calls `wake` after `delay` of tokio's clock.
    fn wake_after(&self, delay: Duration, wake: Box<dyn FnOnce() + Send>);
}

/// An in-process SQS on tokio's clock. Clones share the same queues.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use sqs_engine::testing::InProcessSqs;
///
/// let sqs = InProcessSqs::new();
/// sqs.send("orders", "{\"id\":1}").expect("sent");
/// assert_eq!(sqs.counts("orders").visible, 1);
/// # }
/// ```
#[derive(Clone, Default)]
pub struct InProcessSqs {
    shared: Arc<Shared>,
}

impl fmt::Debug for InProcessSqs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("InProcessSqs")
            .field("queues", &state.queues.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Woken whenever a message may have become receivable.
    arrived: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Default)]
struct State {
    queues: HashMap<String, Queue>,
    /// What was applied, in order; `None` unless made [`journaled`](InProcessSqs::journaled).
    journal: Option<Vec<Applied>>,
    next_id: u64,
    observer: Option<Arc<dyn Observer>>,
    /// Receives the observer counted and whose delivery has not yet been claimed, by message
    /// id and receive count (unique per receive).
    owed: HashSet<(String, u32)>,
    /// The topics, by name (feature `sns`).
    #[cfg(feature = "sns")]
    topics: HashMap<String, sns::Topic>,
}

impl State {
    /// Notes one applied change in the journal, when there is one.
    fn note(&mut self, queue: &str, message_id: &str, change: Change) {
        if let Some(journal) = &mut self.journal {
            journal.push(Applied {
                at: Instant::now(),
                queue: queue.to_owned(),
                message_id: message_id.to_owned(),
                change,
            });
        }
    }
}

/// One change the in-process SQS applied to a message; see [`InProcessSqs::journal`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Applied {
    /// When, on tokio's clock.
    pub at: Instant,
    /// The queue's name.
    pub queue: String,
    /// The message.
    pub message_id: String,
    /// What changed.
    pub change: Change,
}

/// What the in-process SQS applied to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// Sent (deduplicated FIFO sends are not).
    Sent {
        /// The FIFO group, when there is one.
        group_id: Option<String>,
    },
    /// Handed out by a receive, hidden for `visibility` seconds.
    Received {
        /// The receipt handle of this receive.
        receipt_handle: String,
        /// The message's receive count, this receive included.
        receive_count: u32,
        /// The visibility timeout it got, in seconds.
        visibility: u32,
    },
    /// A delete answered with success: `removed` when the handle was the message's newest and
    /// the message is gone, `false` for an older handle or a message already deleted (SQS
    /// answers success there too, and deletes nothing).
    Deleted {
        /// The receipt handle the delete named.
        receipt_handle: String,
        /// Whether the message left the queue.
        removed: bool,
    },
    /// A visibility change applied: hidden for `seconds` from `at`.
    VisibilityChanged {
        /// The receipt handle the change named.
        receipt_handle: String,
        /// The new visibility timeout.
        seconds: u32,
    },
    /// Moved to the dead-letter queue by the redrive policy.
    DeadLettered {
        /// The dead-letter queue's name.
        dead_letter: String,
    },
}

/// The counts of one queue, as `ApproximateNumberOfMessages*` would give them, but exact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueCounts {
    /// Messages that can be received now (on a FIFO queue, including those held behind a
    /// message of their group in flight).
    pub visible: usize,
    /// Messages received and not yet deleted or visible again.
    pub in_flight: usize,
    /// Messages not yet visible after a send with a delay.
    pub delayed: usize,
}

/// One message as it was sent to a queue, for a test to read back.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SentMessage {
    /// The message id SQS assigned.
    pub message_id: String,
    /// The body.
    pub body: String,
    /// The message attributes.
    pub attributes: Vec<(String, MessageAttribute)>,
    /// The FIFO group, when there is one.
    pub group_id: Option<String>,
}

struct Queue {
    name: String,
    url: String,
    arn: String,
    fifo: bool,
    visibility: u32,
    delay: u32,
    content_deduplication: bool,
    redrive: Option<Redrive>,
    /// The access policy, as it was written: the double keeps it and enforces none of it.
    policy: Option<String>,
    messages: VecDeque<Stored>,
    deduplication: HashMap<String, Instant>,
    sent: Vec<SentMessage>,
    /// The subscriptions reading the queue, oldest first: only a watched queue's messages are
    /// counted, and only the oldest subscription receives (see [`Reader`]).
    watchers: Vec<u64>,
    /// On a FIFO queue, what each `ReceiveRequestAttemptId` got, and when.
    attempts: HashMap<String, (Instant, Vec<ReceivedMessage>)>,
}

#[derive(Clone)]
struct Redrive {
    dead_letter: String,
    max_receive_count: u32,
}

struct Stored {
    id: String,
    body: String,
    attributes: Vec<(String, MessageAttribute)>,
    group: Option<String>,
    deduplication_id: Option<String>,
    sequence: u64,
    sent_at: SystemTime,
    visible_at: Instant,
    receive_count: u32,
    first_receive: Option<SystemTime>,
    /// The newest receipt handle and when that receive was.
    receipt: Option<(String, Instant)>,
    /// Counted receivable with the observer, and not yet received.
    counted: bool,
}

impl Stored {
    fn in_flight(&self, now: Instant) -> bool {
        self.receipt.is_some() && self.visible_at > now
    }
}

impl Queue {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            url: format!("http://sqs.in-process.invalid/{ACCOUNT}/{name}"),
            arn: format!("arn:aws:sqs:in-process:{ACCOUNT}:{name}"),
            fifo: name.ends_with(".fifo"),
            visibility: DEFAULT_VISIBILITY,
            delay: 0,
            content_deduplication: false,
            redrive: None,
            policy: None,
            messages: VecDeque::new(),
            deduplication: HashMap::new(),
            sent: Vec::new(),
            watchers: Vec::new(),
            attempts: HashMap::new(),
        }
    }

    /// What the receive with attempt id `id` got, for its retry within five minutes, if none
    /// of those messages was deleted or changed since (each still holds that receipt handle).
    fn attempt_again(&mut self, id: &str, now: Instant) -> Option<Vec<ReceivedMessage>> {
        self.attempts
            .retain(|_, (at, _)| now.saturating_duration_since(*at) < DEDUPLICATION_WINDOW);
        let (_, received) = self.attempts.get(id)?;
        let unchanged = received.iter().all(|message| {
            self.messages.iter().any(|stored| {
                stored.id == message.message_id
                    && stored.visible_at > now
                    && stored
                        .receipt
                        .as_ref()
                        .is_some_and(|(receipt, _)| *receipt == message.receipt_handle)
            })
        });
        unchanged.then(|| received.clone())
    }

    /// Positions of the messages a receive may hand out now, in order: visible ones, and on a
    /// FIFO queue only those with no earlier message of their group still hidden.
    fn receivable(&self, now: Instant) -> Vec<usize> {
        let mut blocked: HashSet<&str> = HashSet::new();
        let mut found = Vec::new();
        for (position, message) in self.messages.iter().enumerate() {
            let group = message.group.as_deref().filter(|_| self.fifo);
            if let Some(group) = group
                && blocked.contains(group)
            {
                continue;
            }
            if message.visible_at <= now {
                found.push(position);
            } else if let Some(group) = group {
                blocked.insert(group);
            }
        }
        found
    }
}

fn invalid(code: &str, message: impl Into<String>) -> CallError {
    CallError::new(CallErrorKind::Invalid, message).with_code(code)
}

fn not_found(url: &str) -> CallError {
    CallError::new(
        CallErrorKind::QueueNotFound,
        format!("the queue {url} does not exist"),
    )
    .with_code("AWS.SimpleQueueService.NonExistentQueue")
}

fn entry_failure(code: &str, message: impl Into<String>) -> EntryResult {
    EntryResult::Failed(EntryFailure {
        code: code.to_owned(),
        sender_fault: true,
        message: Some(message.into()),
    })
}

fn valid_queue_name(name: &str) -> bool {
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    !stem.is_empty()
        && name.len() <= 80
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

/// Whether SQS takes `text` in a body or a string attribute.
fn is_sqs_text(text: &str) -> bool {
    text.chars().all(|c| {
        matches!(c, '\t' | '\n' | '\r') || (c >= '\u{20}' && c != '\u{FFFE}' && c != '\u{FFFF}')
    })
}

fn millis(time: SystemTime) -> String {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
        .to_string()
}

/// A value of the two keys of a redrive policy: `"key":"value"` or `"key":value`.
fn json_value<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let start = json.find(&format!("\"{key}\""))? + key.len() + 2;
    let rest = json[start..].trim_start().strip_prefix(':')?.trim_start();
    if let Some(quoted) = rest.strip_prefix('"') {
        quoted.split('"').next()
    } else {
        rest.split([',', '}']).next().map(str::trim)
    }
}

impl InProcessSqs {
    /// An SQS with no queues yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// An SQS with no queues yet that keeps a journal of every change it applies (see
    /// [`journal`](Self::journal)). The journal grows for as long as the SQS lives: for tests.
    pub fn journaled() -> Self {
        let sqs = Self::default();
        sqs.shared.lock().journal = Some(Vec::new());
        sqs
    }

    /// How many changes the journal holds: a position in it, to tell what happened before a
    /// moment of a test. Zero without a journal.
    pub fn journal_len(&self) -> usize {
        self.shared.lock().journal.as_ref().map_or(0, Vec::len)
    }

    /// The changes applied from position `from` of the journal on, in the order applied.
    pub fn journal_since(&self, from: usize) -> Vec<Applied> {
        self.shared
            .lock()
            .journal
            .as_ref()
            .and_then(|journal| journal.get(from..))
            .map(<[Applied]>::to_vec)
            .unwrap_or_default()
    }

    /// Every change applied, in order; empty unless made [`journaled`](Self::journaled).
    pub fn journal(&self) -> Vec<Applied> {
        self.journal_since(0)
    }

    /// The receipt handles of the messages of `queue` (a name or URL) in flight now: received,
    /// not deleted, and still hidden by that receive (the newest handle of each).
    pub fn in_flight_receipts(&self, queue: &str) -> Vec<String> {
        let now = Instant::now();
        let state = self.shared.lock();
        let Some(queue) = state.queues.get(last_segment(queue)) else {
            return Vec::new();
        };
        queue
            .messages
            .iter()
            .filter(|message| message.in_flight(now))
            .filter_map(|message| message.receipt.as_ref().map(|(receipt, _)| receipt.clone()))
            .collect()
    }

    /// Sends a message with no attributes to the queue `queue` (a name or URL), creating the
    /// queue when it is new. On a FIFO queue the message goes to group `default` with a fresh
    /// deduplication id.
    ///
    /// # Errors
    ///
    /// What SQS answers for the same send: a body it refuses, a queue name it refuses.
    pub fn send(&self, queue: &str, body: &str) -> Result<String, CallError> {
        let fifo = queue.ends_with(".fifo");
        let next = self.shared.lock().next_id;
        let entry = SendEntry {
            body: body.to_owned(),
            attributes: Vec::new(),
            group_id: fifo.then(|| "default".to_owned()),
            deduplication_id: fifo.then(|| format!("send-{next}")),
        };
        self.send_entry(queue, &entry)
    }

    /// Sends one entry to the queue `queue` (a name or URL), creating the queue when it is new:
    /// what `SendMessage` does, on the caller's thread with no awaiting.
    ///
    /// # Errors
    ///
    /// What SQS answers for the same send (see the [module docs](self)).
    pub fn send_entry(&self, queue: &str, entry: &SendEntry) -> Result<String, CallError> {
        let name = last_segment(queue);
        let mut state = self.shared.lock();
        self.send_locked(&mut state, name, entry)
    }

    /// [`send_entry`](Self::send_entry) under the lock the caller holds.
    fn send_locked(
        &self,
        state: &mut State,
        name: &str,
        entry: &SendEntry,
    ) -> Result<String, CallError> {
        let delay = state.queue_or_create(name)?.delay;
        let id = state.send(name, entry)?;
        if delay > 0 {
            self.wake_after(state, name, Duration::from_secs(u64::from(delay)));
        }
        self.refresh(state, name);
        Ok(id)
    }

    /// The counts of `queue` (a name or URL); all zero for a queue that does not exist.
    pub fn counts(&self, queue: &str) -> QueueCounts {
        let now = Instant::now();
        let state = self.shared.lock();
        let Some(queue) = state.queues.get(last_segment(queue)) else {
            return QueueCounts::default();
        };
        let mut counts = QueueCounts::default();
        for message in &queue.messages {
            if message.in_flight(now) {
                counts.in_flight += 1;
            } else if message.visible_at > now {
                counts.delayed += 1;
            } else {
                counts.visible += 1;
            }
        }
        counts
    }

    /// Every message sent to `queue` (a name or URL), or moved to it as its dead-letter queue,
    /// in the order it arrived, deduplicated FIFO sends left out; empty for a queue that does
    /// not exist.
    pub fn sent(&self, queue: &str) -> Vec<SentMessage> {
        self.shared
            .lock()
            .queues
            .get(last_segment(queue))
            .map(|queue| queue.sent.clone())
            .unwrap_or_default()
    }

    /// The bodies of the messages `queue` holds, received or not, in send order.
    pub fn bodies(&self, queue: &str) -> Vec<String> {
        self.shared
            .lock()
            .queues
            .get(last_segment(queue))
            .map(|queue| queue.messages.iter().map(|m| m.body.clone()).collect())
            .unwrap_or_default()
    }

    /// Installs a harness's observer, in place of an earlier one; messages receivable on
    /// watched queues are counted with it. Deliveries counted by an earlier observer are
    /// released to that one.
    pub(crate) fn observe(&self, observer: Arc<dyn Observer>) {
        let mut state = self.shared.lock();
        state.owed.clear();
        for queue in state.queues.values_mut() {
            for message in &mut queue.messages {
                message.counted = false;
            }
        }
        state.observer = Some(observer);
        let names: Vec<String> = state.queues.keys().cloned().collect();
        for name in names {
            self.refresh(&mut state, &name);
        }
    }

    /// Marks `queue` as read by a subscription until the returned guard drops: its receivable
    /// messages are counted with the observer.
    pub(crate) fn watch(&self, queue: &str) -> Watch {
        let name = last_segment(queue).to_owned();
        let mut state = self.shared.lock();
        state.next_id += 1;
        let id = state.next_id;
        if state.queue_or_create(&name).is_ok() {
            if let Some(queue) = state.queues.get_mut(&name) {
                queue.watchers.push(id);
            }
            self.refresh(&mut state, &name);
        }
        Watch {
            sqs: self.clone(),
            queue: name,
            id,
        }
    }

    /// Takes over the count of the receive `(message_id, receive_count)`: `Some` when the
    /// observer counted it, a guard that tells the observer when it drops.
    pub(crate) fn claim(&self, message_id: &str, receive_count: u32) -> Option<Counted> {
        let mut state = self.shared.lock();
        if state.owed.remove(&(message_id.to_owned(), receive_count)) {
            state.observer.clone().map(Counted)
        } else {
            None
        }
    }

    /// Moves spent messages to their dead-letter queue, counts what became receivable on a
    /// watched queue, and wakes the receivers.
    fn refresh(&self, state: &mut State, name: &str) {
        let now = Instant::now();
        let moved = state.redrive_spent(name, now);
        let observer = state.observer.clone();
        let Some(queue) = state.queues.get_mut(name) else {
            return;
        };
        let receivable = queue.receivable(now);
        if let Some(observer) = &observer
            && !queue.watchers.is_empty()
        {
            for position in &receivable {
                let message = &mut queue.messages[*position];
                if !message.counted {
                    message.counted = true;
                    observer.enqueued();
                }
            }
        }
        if let Some(dead_letter) = moved {
            self.refresh(state, &dead_letter);
        }
        if !receivable.is_empty() {
            self.shared.arrived.notify_waiters();
        }
    }

    /// Looks at `name` again once `delay` has passed on tokio's clock.
    fn wake_after(&self, state: &State, name: &str, delay: Duration) {
        let sqs = self.clone();
        let name = name.to_owned();
        let wake = Box::new(move || {
            let mut state = sqs.shared.lock();
            sqs.refresh(&mut state, &name);
        });
        match &state.observer {
            Some(observer) => observer.wake_after(delay, wake),
            None => {
                // Outside a runtime (a send from a plain thread) nothing can wait: the message
                // is found by the next receive that looks.
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        tokio::time::sleep(delay).await;
                        wake();
                    });
                }
            }
        }
    }

    fn url_of(&self, url: &str) -> Result<String, CallError> {
        let name = last_segment(url);
        if self.shared.lock().queues.contains_key(name) {
            Ok(name.to_owned())
        } else {
            Err(not_found(url))
        }
    }

    fn receive_now(
        &self,
        name: &str,
        reader: Option<u64>,
        request: &ReceiveRequest<'_>,
    ) -> Vec<ReceivedMessage> {
        let now = Instant::now();
        let mut state = self.shared.lock();
        let moved = state.redrive_spent(name, now);
        if let Some(dead_letter) = moved {
            self.refresh(&mut state, &dead_letter);
        }
        let observer = state.observer.clone();
        let next_receipt = state.next_id;
        let Some(queue) = state.queues.get_mut(name) else {
            return Vec::new();
        };
        if reader.is_some() && queue.watchers.first() != reader.as_ref() {
            return Vec::new();
        }
        let visibility = if request.visibility_timeout == 0 {
            queue.visibility
        } else {
            request.visibility_timeout
        };
        if queue.fifo
            && let Some(id) = request.attempt_id
            && let Some(again) = queue.attempt_again(id, now)
        {
            return again;
        }
        let take: Vec<usize> = queue
            .receivable(now)
            .into_iter()
            .take(usize::from(request.max_messages))
            .collect();
        let fifo = queue.fifo;
        let watched = !queue.watchers.is_empty();
        let mut owed = Vec::new();
        let mut notes = Vec::new();
        let mut received = Vec::with_capacity(take.len());
        for (n, position) in take.into_iter().enumerate() {
            let message = &mut queue.messages[position];
            message.receive_count += 1;
            let first_receive = *message.first_receive.get_or_insert_with(SystemTime::now);
            let receipt = format!(
                "{}:{}:{}",
                message.id,
                message.receive_count,
                next_receipt + n as u64
            );
            message.receipt = Some((receipt.clone(), now));
            message.visible_at = now + Duration::from_secs(u64::from(visibility));
            notes.push((
                message.id.clone(),
                Change::Received {
                    receipt_handle: receipt.clone(),
                    receive_count: message.receive_count,
                    visibility,
                },
            ));
            if let Some(observer) = &observer {
                if !message.counted && watched {
                    observer.enqueued();
                    message.counted = true;
                }
                if message.counted {
                    message.counted = false;
                    owed.push((message.id.clone(), message.receive_count));
                }
            }
            let mut attributes = HashMap::from([
                (
                    "ApproximateReceiveCount".to_owned(),
                    message.receive_count.to_string(),
                ),
                ("SentTimestamp".to_owned(), millis(message.sent_at)),
                (
                    "ApproximateFirstReceiveTimestamp".to_owned(),
                    millis(first_receive),
                ),
                ("SenderId".to_owned(), ACCOUNT.to_owned()),
            ]);
            if fifo {
                if let Some(group) = &message.group {
                    attributes.insert("MessageGroupId".to_owned(), group.clone());
                }
                if let Some(id) = &message.deduplication_id {
                    attributes.insert("MessageDeduplicationId".to_owned(), id.clone());
                }
                attributes.insert("SequenceNumber".to_owned(), message.sequence.to_string());
            }
            received.push(ReceivedMessage {
                message_id: message.id.clone(),
                receipt_handle: receipt,
                body: message.body.clone(),
                attributes,
                message_attributes: message.attributes.iter().cloned().collect(),
            });
        }
        if fifo
            && !received.is_empty()
            && let Some(id) = request.attempt_id
        {
            queue
                .attempts
                .insert(id.to_owned(), (now, received.clone()));
        }
        state.next_id += received.len() as u64;
        state.owed.extend(owed);
        for (message_id, change) in notes {
            state.note(name, &message_id, change);
        }
        if !received.is_empty() {
            self.wake_after(&state, name, Duration::from_secs(u64::from(visibility)));
        }
        received
    }

    fn delete(&self, name: &str, handles: &[&str]) -> Vec<EntryResult> {
        let mut state = self.shared.lock();
        let observer = state.observer.clone();
        let Some(queue) = state.queues.get_mut(name) else {
            return Vec::new();
        };
        let mut results = Vec::with_capacity(handles.len());
        let mut notes = Vec::new();
        for handle in handles {
            let (id, _) = handle.split_once(':').unwrap_or((handle, ""));
            let position = queue.messages.iter().position(|m| m.id == id);
            let deleted = |removed| {
                (
                    id.to_owned(),
                    Change::Deleted {
                        receipt_handle: (*handle).to_owned(),
                        removed,
                    },
                )
            };
            let result = match position {
                Some(position) => {
                    let current = queue.messages[position]
                        .receipt
                        .as_ref()
                        .is_some_and(|(receipt, _)| receipt == handle);
                    notes.push(deleted(current));
                    if current
                        && let Some(message) = queue.messages.remove(position)
                        && message.counted
                        && let Some(observer) = &observer
                    {
                        observer.consumed();
                    }
                    // An older handle of a message received again: success, nothing deleted.
                    EntryResult::Ok
                }
                // A message already deleted: SQS answers success again.
                None if handle.contains(':') && id.starts_with("m-") => {
                    notes.push(deleted(false));
                    EntryResult::Ok
                }
                None => entry_failure(
                    "ReceiptHandleIsInvalid",
                    format!("the receipt handle {handle} is not valid"),
                ),
            };
            results.push(result);
        }
        for (message_id, change) in notes {
            state.note(name, &message_id, change);
        }
        self.refresh(&mut state, name);
        results
    }

    fn change_visibility(&self, name: &str, entries: &[(&str, u32)]) -> Vec<EntryResult> {
        let now = Instant::now();
        let mut state = self.shared.lock();
        let Some(queue) = state.queues.get_mut(name) else {
            return Vec::new();
        };
        let mut results = Vec::with_capacity(entries.len());
        let mut wakes = Vec::new();
        let mut notes = Vec::new();
        for (handle, seconds) in entries {
            let (id, _) = handle.split_once(':').unwrap_or((handle, ""));
            let Some(message) = queue.messages.iter_mut().find(|m| m.id == id) else {
                results.push(if handle.contains(':') && id.starts_with("m-") {
                    entry_failure(
                        "AWS.SimpleQueueService.MessageNotInflight",
                        "the message is not in flight",
                    )
                } else {
                    entry_failure(
                        "ReceiptHandleIsInvalid",
                        format!("the receipt handle {handle} is not valid"),
                    )
                });
                continue;
            };
            let received_at = match &message.receipt {
                Some((receipt, at)) if receipt == handle && message.visible_at > now => *at,
                _ => {
                    results.push(entry_failure(
                        "AWS.SimpleQueueService.MessageNotInflight",
                        "the message is not in flight",
                    ));
                    continue;
                }
            };
            let until = now + Duration::from_secs(u64::from(*seconds));
            if *seconds > MAX_VISIBILITY_SECS
                || until > received_at + Duration::from_secs(u64::from(MAX_VISIBILITY_SECS))
            {
                results.push(entry_failure(
                    "InvalidParameterValue",
                    format!(
                        "a visibility timeout of {seconds} s ends more than 12 hours after the receive"
                    ),
                ));
                continue;
            }
            message.visible_at = until;
            notes.push((
                message.id.clone(),
                Change::VisibilityChanged {
                    receipt_handle: (*handle).to_owned(),
                    seconds: *seconds,
                },
            ));
            if *seconds > 0 {
                wakes.push(Duration::from_secs(u64::from(*seconds)));
            }
            results.push(EntryResult::Ok);
        }
        for (message_id, change) in notes {
            state.note(name, &message_id, change);
        }
        for delay in wakes {
            self.wake_after(&state, name, delay);
        }
        self.refresh(&mut state, name);
        results
    }

    fn send_batch(&self, name: &str, entries: &[SendEntry]) -> Result<Vec<EntryResult>, CallError> {
        let mut state = self.shared.lock();
        let total: usize = entries.iter().map(SendEntry::size).sum();
        if total > MAX_MESSAGE_BYTES {
            return Err(invalid(
                "AWS.SimpleQueueService.BatchRequestTooLong",
                format!("the batch is {total} bytes, SQS takes at most {MAX_MESSAGE_BYTES}"),
            ));
        }
        let results: Vec<EntryResult> = entries
            .iter()
            .map(|entry| match state.send(name, entry) {
                Ok(_) => EntryResult::Ok,
                Err(error) => entry_failure(
                    error.code.as_deref().unwrap_or("InvalidParameterValue"),
                    error.message,
                ),
            })
            .collect();
        let delay = state.queues.get(name).map_or(0, |queue| queue.delay);
        if delay > 0 && results.contains(&EntryResult::Ok) {
            self.wake_after(&state, name, Duration::from_secs(u64::from(delay)));
        }
        self.refresh(&mut state, name);
        Ok(results)
    }
}

impl State {
    fn queue_or_create(&mut self, name: &str) -> Result<&mut Queue, CallError> {
        if !valid_queue_name(name) {
            return Err(invalid(
                "InvalidParameterValue",
                format!(
                    "`{name}` is not a queue name SQS takes: 1 to 80 letters, digits, `-` and `_`, and `.fifo` for a FIFO queue"
                ),
            ));
        }
        Ok(self
            .queues
            .entry(name.to_owned())
            .or_insert_with(|| Queue::new(name)))
    }

    /// Stores one sent message; the message id, or what SQS answers for it.
    fn send(&mut self, name: &str, entry: &SendEntry) -> Result<String, CallError> {
        let now = Instant::now();
        self.next_id += 1;
        let id = format!("m-{:08}", self.next_id);
        let Some(queue) = self.queues.get_mut(name) else {
            return Err(not_found(name));
        };
        if entry.body.is_empty() {
            return Err(invalid(
                "InvalidParameterValue",
                "the message body is empty",
            ));
        }
        if !is_sqs_text(&entry.body) {
            return Err(invalid(
                "InvalidMessageContents",
                "the message body holds characters SQS does not take",
            ));
        }
        if entry.attributes.len() > MAX_ATTRIBUTES {
            return Err(invalid(
                "InvalidParameterValue",
                format!(
                    "{} message attributes, SQS takes at most {MAX_ATTRIBUTES}",
                    entry.attributes.len()
                ),
            ));
        }
        for (attribute, value) in &entry.attributes {
            let empty = match &value.value {
                AttributeValue::String(text) => text.is_empty() || !is_sqs_text(text),
                AttributeValue::Binary(bytes) => bytes.is_empty(),
            };
            if attribute.is_empty() || empty {
                return Err(invalid(
                    "InvalidParameterValue",
                    format!("message attribute `{attribute}` has no value SQS takes"),
                ));
            }
        }
        let bytes = entry.size();
        if bytes > MAX_MESSAGE_BYTES {
            return Err(invalid(
                "InvalidParameterValue",
                format!("the message is {bytes} bytes, SQS takes at most {MAX_MESSAGE_BYTES}"),
            ));
        }
        let deduplication_id = if queue.fifo {
            if entry.group_id.is_none() {
                return Err(invalid(
                    "MissingParameter",
                    "a FIFO queue needs a MessageGroupId",
                ));
            }
            let dedup = match (&entry.deduplication_id, queue.content_deduplication) {
                (Some(id), _) => id.clone(),
                (None, true) => format!("content:{}", entry.body),
                (None, false) => {
                    return Err(invalid(
                        "InvalidParameterValue",
                        "a FIFO queue without content-based deduplication needs a MessageDeduplicationId",
                    ));
                }
            };
            queue
                .deduplication
                .retain(|_, at| now.saturating_duration_since(*at) < DEDUPLICATION_WINDOW);
            if queue.deduplication.contains_key(&dedup) {
                // SQS answers success and keeps only the first.
                return Ok(id);
            }
            queue.deduplication.insert(dedup.clone(), now);
            Some(dedup)
        } else {
            if entry.deduplication_id.is_some() {
                return Err(invalid(
                    "InvalidParameterValue",
                    "a MessageDeduplicationId is only for FIFO queues",
                ));
            }
            None
        };
        let group_id = entry.group_id.clone();
        queue.sent.push(SentMessage {
            message_id: id.clone(),
            body: entry.body.clone(),
            attributes: entry.attributes.clone(),
            group_id: entry.group_id.clone(),
        });
        queue.messages.push_back(Stored {
            id: id.clone(),
            body: entry.body.clone(),
            attributes: entry.attributes.clone(),
            group: entry.group_id.clone(),
            deduplication_id,
            sequence: self.next_id,
            sent_at: SystemTime::now(),
            visible_at: now + Duration::from_secs(u64::from(queue.delay)),
            receive_count: 0,
            first_receive: None,
            receipt: None,
            counted: false,
        });
        self.note(name, &id, Change::Sent { group_id });
        Ok(id)
    }

    /// Moves the visible messages of `name` that spent their receives to its dead-letter queue;
    /// the dead-letter queue's name when any moved.
    fn redrive_spent(&mut self, name: &str, now: Instant) -> Option<String> {
        let queue = self.queues.get_mut(name)?;
        let redrive = queue.redrive.clone()?;
        let mut moved = Vec::new();
        let mut kept = VecDeque::with_capacity(queue.messages.len());
        for message in queue.messages.drain(..) {
            if message.visible_at <= now && message.receive_count >= redrive.max_receive_count {
                moved.push(message);
            } else {
                kept.push_back(message);
            }
        }
        queue.messages = kept;
        if moved.is_empty() {
            return None;
        }
        let withdrawn = moved.iter().filter(|m| m.counted).count();
        if let Some(observer) = &self.observer {
            for _ in 0..withdrawn {
                observer.consumed();
            }
        }
        for message in &moved {
            self.note(
                name,
                &message.id,
                Change::DeadLettered {
                    dead_letter: redrive.dead_letter.clone(),
                },
            );
        }
        let dead_letter = self.queues.get_mut(&redrive.dead_letter)?;
        for mut message in moved {
            // What arrives at the dead-letter queue is in its log, as what is sent to it is.
            dead_letter.sent.push(SentMessage {
                message_id: message.id.clone(),
                body: message.body.clone(),
                attributes: message.attributes.clone(),
                group_id: message.group.clone(),
            });
            message.receipt = None;
            message.counted = false;
            message.visible_at = now;
            dead_letter.messages.push_back(message);
        }
        Some(redrive.dead_letter)
    }

    fn queue_by_arn(&self, arn: &str) -> Option<&Queue> {
        self.queues.values().find(|queue| queue.arn == arn)
    }

    fn set_attributes(
        &mut self,
        name: &str,
        attributes: &[(&str, String)],
    ) -> Result<(), CallError> {
        let fifo = self.queues.get(name).ok_or_else(|| not_found(name))?.fifo;
        let mut redrive = None;
        for (attribute, value) in attributes {
            match *attribute {
                "VisibilityTimeout" | "DelaySeconds" => {
                    let limit = if *attribute == "DelaySeconds" {
                        900
                    } else {
                        MAX_VISIBILITY_SECS
                    };
                    match value.parse::<u32>() {
                        Ok(seconds) if seconds <= limit => {}
                        _ => {
                            return Err(invalid(
                                "InvalidAttributeValue",
                                format!("{attribute} `{value}` is not 0 to {limit} seconds"),
                            ));
                        }
                    }
                }
                "FifoQueue" => {
                    if value.parse::<bool>().ok() != Some(fifo) {
                        return Err(invalid(
                            "InvalidAttributeValue",
                            format!("FifoQueue `{value}` does not match the queue `{name}`"),
                        ));
                    }
                }
                "ContentBasedDeduplication" if fifo => {}
                "Policy" => {}
                "RedrivePolicy" => {
                    let arn = json_value(value, "deadLetterTargetArn").unwrap_or_default();
                    let count = json_value(value, "maxReceiveCount")
                        .and_then(|count| count.parse::<u32>().ok())
                        .filter(|count| MaxReceiveCount::contains(*count));
                    let Some(count) = count else {
                        return Err(invalid(
                            "InvalidAttributeValue",
                            format!(
                                "the redrive policy `{value}` needs a maxReceiveCount from {} to {}",
                                MaxReceiveCount::MIN,
                                MaxReceiveCount::MAX
                            ),
                        ));
                    };
                    let Some(dead_letter) = self.queue_by_arn(arn) else {
                        return Err(invalid(
                            "InvalidAttributeValue",
                            format!("the dead-letter queue `{arn}` does not exist"),
                        ));
                    };
                    if dead_letter.fifo != fifo {
                        return Err(invalid(
                            "InvalidAttributeValue",
                            format!(
                                "the dead-letter queue `{}` is not of the same kind (FIFO or standard) as `{name}`",
                                dead_letter.name
                            ),
                        ));
                    }
                    redrive = Some(Redrive {
                        dead_letter: dead_letter.name.clone(),
                        max_receive_count: count,
                    });
                }
                other => {
                    return Err(invalid(
                        "InvalidAttributeName",
                        format!("the attribute `{other}` is not one this double takes"),
                    ));
                }
            }
        }
        let queue = self.queues.get_mut(name).ok_or_else(|| not_found(name))?;
        for (attribute, value) in attributes {
            match *attribute {
                "VisibilityTimeout" => queue.visibility = value.parse().unwrap_or(queue.visibility),
                "DelaySeconds" => queue.delay = value.parse().unwrap_or(queue.delay),
                "Policy" => queue.policy = Some(value.clone()),
                "ContentBasedDeduplication" => {
                    queue.content_deduplication = value.parse().unwrap_or(false);
                }
                _ => {}
            }
        }
        if redrive.is_some() {
            queue.redrive = redrive;
        }
        Ok(())
    }
}

/// A delivery the observer counted: dropped once the delivery is done with (settled and
/// answered, or dropped unsettled), it tells the observer.
pub(crate) struct Counted(Arc<dyn Observer>);

impl fmt::Debug for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Counted")
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.consumed();
    }
}

/// A subscription reading a queue of an [`InProcessSqs`]; see [`InProcessSqs::watch`].
pub(crate) struct Watch {
    sqs: InProcessSqs,
    queue: String,
    id: u64,
}

impl Watch {
    /// The [`SqsApi`] the watching subscription receives through.
    pub(crate) fn reader(&self) -> Reader {
        Reader {
            sqs: self.sqs.clone(),
            id: self.id,
        }
    }
}

/// One subscription's view of an [`InProcessSqs`]: where a queue has several subscriptions,
/// only the oldest receives, so which one a message reaches is known before it is sent (the
/// framework's harness asks). On SQS any of them may; a test of competing consumers belongs
/// on LocalStack.
pub(crate) struct Reader {
    sqs: InProcessSqs,
    id: u64,
}

impl SqsDecorator for Reader {
    type Inner = InProcessSqs;

    fn inner(&self) -> &InProcessSqs {
        &self.sqs
    }

    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        self.sqs.receive_as(Some(self.id), request)
    }
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch").field("queue", &self.queue).finish()
    }
}

impl Drop for Watch {
    /// The last subscription of a queue gone, what was counted receivable there is no longer
    /// waited for.
    fn drop(&mut self) {
        let mut state = self.sqs.shared.lock();
        let observer = state.observer.clone();
        let Some(queue) = state.queues.get_mut(&self.queue) else {
            return;
        };
        queue.watchers.retain(|id| *id != self.id);
        // The next subscription, if any, receives now.
        self.sqs.shared.arrived.notify_waiters();
        if !queue.watchers.is_empty() {
            return;
        }
        for message in &mut queue.messages {
            if message.counted {
                message.counted = false;
                if let Some(observer) = &observer {
                    observer.consumed();
                }
            }
        }
    }
}

impl InProcessSqs {
    /// A receive by the subscription `reader` (none: any caller, which always receives).
    fn receive_as<'a>(
        &'a self,
        reader: Option<u64>,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        Box::pin(async move {
            let name = self.url_of(request.queue_url)?;
            if !(1..=MAX_BATCH).contains(&usize::from(request.max_messages)) {
                return Err(invalid(
                    "InvalidParameterValue",
                    "MaxNumberOfMessages must be 1 to 10",
                ));
            }
            if request.wait_time > WaitTime::MAX {
                return Err(invalid(
                    "InvalidParameterValue",
                    "WaitTimeSeconds must be 0 to 20",
                ));
            }
            if request.visibility_timeout > MAX_VISIBILITY_SECS {
                return Err(invalid(
                    "InvalidParameterValue",
                    "VisibilityTimeout must be 0 to 43200",
                ));
            }
            loop {
                let arrived = self.shared.arrived.notified();
                tokio::pin!(arrived);
                arrived.as_mut().enable();
                let received = self.receive_now(&name, reader, request);
                if !received.is_empty() || request.wait_time.is_zero() {
                    return Ok(received);
                }
                arrived.await;
            }
        })
    }
}

impl SqsApi for InProcessSqs {
    fn queue_url<'a>(&'a self, queue_name: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async move {
            let mut state = self.shared.lock();
            Ok(state.queue_or_create(queue_name)?.url.clone())
        })
    }

    fn create_queue<'a>(
        &'a self,
        queue_name: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async move {
            let mut state = self.shared.lock();
            let url = state.queue_or_create(queue_name)?.url.clone();
            state.set_attributes(queue_name, attributes)?;
            Ok(url)
        })
    }

    fn queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
    ) -> BoxFuture<'a, Result<QueueAttributes, CallError>> {
        Box::pin(async move {
            let state = self.shared.lock();
            let queue = state
                .queues
                .get(last_segment(queue_url))
                .ok_or_else(|| not_found(queue_url))?;
            let redrive_policy = queue.redrive.as_ref().and_then(|redrive| {
                let arn = &state.queues.get(&redrive.dead_letter)?.arn;
                Some(format!(
                    r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":{}}}"#,
                    redrive.max_receive_count
                ))
            });
            Ok(QueueAttributes {
                arn: Some(queue.arn.clone()),
                visibility_timeout: Some(queue.visibility),
                fifo: queue.fifo,
                redrive_policy,
                policy: queue.policy.clone(),
            })
        })
    }

    fn set_queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<(), CallError>> {
        Box::pin(async move {
            let name = last_segment(queue_url);
            let mut state = self.shared.lock();
            state.set_attributes(name, attributes)?;
            self.refresh(&mut state, name);
            Ok(())
        })
    }

    /// Hands out what is receivable; with a wait time and nothing there, waits until something
    /// is, with no timer (see the [module docs](self)).
    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        self.receive_as(None, request)
    }

    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        Box::pin(async move {
            let name = self.url_of(queue_url)?;
            check_batch(receipt_handles.len())?;
            Ok(self.delete(&name, receipt_handles))
        })
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        Box::pin(async move {
            let name = self.url_of(queue_url)?;
            check_batch(entries.len())?;
            Ok(self.change_visibility(&name, entries))
        })
    }

    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        Box::pin(async move {
            let name = self.url_of(queue_url)?;
            check_batch(entries.len())?;
            self.send_batch(&name, entries)
        })
    }
}

/// A bug put into the engine on purpose, for a simulation to prove that its invariants catch
/// it. Only builds with the `testing` feature have the switch ([`inject_defect`]); elsewhere
/// the engine's checks of it are constant `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Defect {
    /// A settled delivery stays in the heartbeat's schedule: its visibility is extended after
    /// its settlement.
    HeartbeatKeptAfterSettle,
    /// A `retry_after` delay is sent in whole seconds rounded down instead of up.
    RetryAfterRoundedDown,
    /// A FIFO group's next message received in the same batch starts without waiting for the
    /// turn of the one before it.
    FifoNextStartedEarly,
}

thread_local! {
    static DEFECT: std::cell::Cell<Option<Defect>> = const { std::cell::Cell::new(None) };
}

/// Switches `defect` on (or, with `None`, every defect off) for engines running on this thread,
/// until the returned guard drops. A simulation on a current-thread runtime runs the whole
/// engine on the thread that switched it on; other threads are not affected.
#[must_use = "the defect is switched off again when the guard drops"]
pub fn inject_defect(defect: Option<Defect>) -> DefectGuard {
    let before = DEFECT.with(|cell| cell.replace(defect));
    DefectGuard { before }
}

/// Switches the defect of [`inject_defect`] off again (back to what was on before) when
/// dropped.
#[derive(Debug)]
pub struct DefectGuard {
    before: Option<Defect>,
}

impl Drop for DefectGuard {
    fn drop(&mut self) {
        DEFECT.with(|cell| cell.set(self.before));
    }
}

/// Whether `defect` is switched on for this thread.
pub(crate) fn defect_on(defect: Defect) -> bool {
    DEFECT.with(|cell| cell.get() == Some(defect))
}

fn check_batch(entries: usize) -> Result<(), CallError> {
    match entries {
        0 => Err(invalid(
            "AWS.SimpleQueueService.EmptyBatchRequest",
            "a batch call needs at least one entry",
        )),
        1..=MAX_BATCH => Ok(()),
        _ => Err(invalid(
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            format!("{entries} entries, a batch call takes at most {MAX_BATCH}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(url: &str) -> ReceiveRequest<'_> {
        ReceiveRequest {
            queue_url: url,
            max_messages: 10,
            wait_time: Duration::ZERO,
            visibility_timeout: 0,
            attempt_id: None,
        }
    }

    async fn url(sqs: &InProcessSqs, name: &str) -> String {
        sqs.queue_url(name).await.expect("queue url")
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_retry_comes_back_after_its_delay_on_tokios_clock() {
        let sqs = InProcessSqs::new();
        sqs.send("orders", "one").expect("sent");
        let url = url(&sqs, "orders").await;
        let first = sqs.receive(&request(&url)).await.expect("receive");
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].attributes["ApproximateReceiveCount"], "1");
        let handle = first[0].receipt_handle.as_str();
        let answer = sqs
            .change_message_visibility_batch(&url, &[(handle, 60)])
            .await
            .expect("change");
        assert_eq!(answer, vec![EntryResult::Ok]);

        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(
            sqs.receive(&request(&url))
                .await
                .expect("receive")
                .is_empty()
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let again = sqs.receive(&request(&url)).await.expect("receive");
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].attributes["ApproximateReceiveCount"], "2");

        // The first handle is stale now: answered with success, and deletes nothing.
        let stale = sqs
            .delete_message_batch(&url, &[handle])
            .await
            .expect("delete");
        assert_eq!(stale, vec![EntryResult::Ok]);
        assert_eq!(sqs.counts("orders").in_flight, 1);
        let current = again[0].receipt_handle.as_str();
        sqs.delete_message_batch(&url, &[current])
            .await
            .expect("delete");
        assert_eq!(sqs.counts("orders"), QueueCounts::default());
    }

    #[tokio::test(start_paused = true)]
    async fn a_visibility_past_twelve_hours_from_the_receive_is_refused() {
        let sqs = InProcessSqs::new();
        sqs.send("orders", "one").expect("sent");
        let url = url(&sqs, "orders").await;
        let received = sqs.receive(&request(&url)).await.expect("receive");
        let handle = received[0].receipt_handle.as_str();
        sqs.change_message_visibility_batch(&url, &[(handle, 7_200)])
            .await
            .expect("change");
        tokio::time::advance(Duration::from_secs(3_600)).await;
        let answer = sqs
            .change_message_visibility_batch(&url, &[(handle, 43_200)])
            .await
            .expect("change");
        assert!(
            matches!(&answer[0], EntryResult::Failed(f) if f.code == "InvalidParameterValue"),
            "{answer:?}"
        );
        let within = sqs
            .change_message_visibility_batch(&url, &[(handle, 39_600)])
            .await
            .expect("change");
        assert_eq!(within, vec![EntryResult::Ok]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fifo_group_with_a_message_in_flight_hands_out_nothing_more() {
        let sqs = InProcessSqs::new();
        sqs.send("orders.fifo", "a1").expect("sent");
        sqs.send("orders.fifo", "a2").expect("sent");
        let url = url(&sqs, "orders.fifo").await;
        let one = ReceiveRequest {
            max_messages: 1,
            ..request(&url)
        };
        let first = sqs.receive(&one).await.expect("receive");
        assert_eq!(first[0].body, "a1");
        assert!(sqs.receive(&one).await.expect("receive").is_empty());
        let handle = first[0].receipt_handle.as_str();
        sqs.delete_message_batch(&url, &[handle])
            .await
            .expect("delete");
        assert_eq!(sqs.receive(&one).await.expect("receive")[0].body, "a2");
    }

    #[tokio::test(start_paused = true)]
    async fn a_fifo_receive_retried_with_its_attempt_id_gets_the_same_messages() {
        let sqs = InProcessSqs::new();
        for body in ["a1", "a2", "a3"] {
            sqs.send("orders.fifo", body).expect("sent");
        }
        let url = url(&sqs, "orders.fifo").await;
        let attempt = ReceiveRequest {
            max_messages: 2,
            attempt_id: Some("attempt-1"),
            ..request(&url)
        };
        // The answer of the first attempt is lost on the way: the retry gets it again.
        let lost = sqs.receive(&attempt).await.expect("receive");
        assert_eq!(lost.len(), 2);
        let again = sqs.receive(&attempt).await.expect("receive");
        let handles = |messages: &[ReceivedMessage]| -> Vec<String> {
            messages.iter().map(|m| m.receipt_handle.clone()).collect()
        };
        assert_eq!(
            handles(&again),
            handles(&lost),
            "the same messages and receipt handles"
        );
        assert_eq!(again[0].attributes["ApproximateReceiveCount"], "1");
        // Once one of them is deleted, the id no longer replays.
        let handle = again[0].receipt_handle.as_str();
        sqs.delete_message_batch(&url, &[handle])
            .await
            .expect("delete");
        assert!(
            sqs.receive(&attempt).await.expect("receive").is_empty(),
            "a2 is still in flight, so its group hands out nothing"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_spent_message_moves_to_the_dead_letter_queue_and_bad_input_is_refused() {
        let sqs = InProcessSqs::new();
        let dead = url(&sqs, "orders-dead").await;
        let url = url(&sqs, "orders").await;
        let arn = sqs
            .queue_attributes(&dead)
            .await
            .expect("attributes")
            .arn
            .expect("arn");
        let policy = format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":"2"}}"#);
        sqs.set_queue_attributes(&url, &[("RedrivePolicy", policy)])
            .await
            .expect("redrive");
        sqs.send("orders", "spent").expect("sent");
        for _ in 0..2 {
            let received = sqs.receive(&request(&url)).await.expect("receive");
            let handle = received[0].receipt_handle.as_str();
            sqs.change_message_visibility_batch(&url, &[(handle, 0)])
                .await
                .expect("change");
        }
        assert!(
            sqs.receive(&request(&url))
                .await
                .expect("receive")
                .is_empty()
        );
        assert_eq!(sqs.bodies("orders-dead"), vec!["spent".to_owned()]);
        let arrived: Vec<String> = sqs
            .sent("orders-dead")
            .into_iter()
            .map(|sent| sent.body)
            .collect();
        assert_eq!(
            arrived,
            ["spent"],
            "the move is in the dead-letter queue's log"
        );

        assert!(sqs.send("orders", "").is_err(), "an empty body");
        assert!(
            sqs.send("orders", "\u{1}").is_err(),
            "a character SQS refuses"
        );
        assert!(
            sqs.send("o".repeat(81).as_str(), "x").is_err(),
            "a name too long"
        );
        let too_many = vec![SendEntry::default(); 11];
        assert!(sqs.send_message_batch(&url, &too_many).await.is_err());
    }
}
