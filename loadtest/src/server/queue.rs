//! One in-memory queue: its attributes, its messages and their visibility.
//!
//! Each message is in one of three states: visible (its id waits in a FIFO of visible
//! ids), in flight after a receive, or delayed after a send with a delay. The last two have
//! a deadline, kept in an ordered set of `(deadline, id)`; a message whose deadline has
//! passed is moved back to the visible FIFO by the next operation on the queue
//! ([`State::release_due`]), so no background task is needed, and a long poll sleeps until
//! the earliest deadline at most. A receive therefore costs O(messages received + deadlines
//! passed), never a scan of the queue. A message deleted while visible leaves its id in the
//! FIFO; the id is skipped when it comes up.
//!
//! A FIFO queue (a name ending in `.fifo`) keeps, besides, the rules a FIFO consumer relies
//! on: each message has a group and a sequence number (the queue's own counter, increasing);
//! a receive hands out a group's messages in send order, never one while an earlier message
//! of its group is in flight, and may hand out several consecutive messages of one group;
//! a send whose deduplication id (or, with `ContentBasedDeduplication`, body) was seen in
//! the last five minutes is answered with the first message's id and not stored again.
//! Simplified against SQS: deduplication keys on the MD5 of the body rather than its
//! SHA-256, `ReceiveRequestAttemptId` is ignored, and a receive walks the groups whose
//! oldest message is oldest first (O(groups) per receive). Standard queues never touch this
//! state. A benchmark target, not a reference implementation.
//!
//! Times that clients see (`SentTimestamp`, `ApproximateFirstReceiveTimestamp`,
//! `CreatedTimestamp`) are wall-clock; visibility and delay deadlines use tokio's clock.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::protocol::{
    ACCOUNT_ID, ErrorKind, MessageAttributes, NewMessage, REGION, SqsError,
    body_characters_allowed, md5_hex, md5_of_attributes, validate_attributes,
};

/// The longest visibility timeout SQS allows, in seconds (12 hours).
pub(crate) const MAX_VISIBILITY_TIMEOUT: i64 = sqs_engine::limits::MAX_VISIBILITY_SECS as i64;

/// The longest delay SQS allows, in seconds (15 minutes).
const MAX_DELAY_SECONDS: i64 = 900;

/// The attributes `CreateQueue` and `SetQueueAttributes` accept and store, with the value
/// a queue has when none was set (`None`: absent until set).
const SETTABLE_ATTRIBUTES: [(&str, Option<&str>); 14] = [
    ("DelaySeconds", Some("0")),
    ("MaximumMessageSize", Some("262144")),
    ("MessageRetentionPeriod", Some("345600")),
    ("ReceiveMessageWaitTimeSeconds", Some("0")),
    ("VisibilityTimeout", Some("30")),
    ("Policy", None),
    ("RedrivePolicy", None),
    ("RedriveAllowPolicy", None),
    ("KmsMasterKeyId", None),
    ("KmsDataKeyReusePeriodSeconds", None),
    ("SqsManagedSseEnabled", None),
    ("ContentBasedDeduplication", None),
    ("DeduplicationScope", None),
    ("FifoThroughputLimit", None),
];

/// The attributes the server computes: readable, never set.
const COMPUTED_ATTRIBUTES: [&str; 7] = [
    "QueueArn",
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "FifoQueue",
];

/// Milliseconds since the Unix epoch, by the wall clock.
pub(crate) fn epoch_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A random id in the textual form of a version 4 UUID, as SQS message ids look.
pub(crate) fn random_id() -> String {
    let bits = fastrand::u128(..);
    // Version 4, variant 10xx.
    let bits = (bits & !(0xF << 76) & !(0x3 << 62)) | (0x4 << 76) | (0x2 << 62);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        bits >> 96,
        (bits >> 80) & 0xFFFF,
        (bits >> 64) & 0xFFFF,
        (bits >> 48) & 0xFFFF,
        bits & 0xFFFF_FFFF_FFFF
    )
}

/// Whether `name` is a valid queue name: 1 to 80 letters, digits, `-` and `_`, with the
/// `.fifo` suffix counted in the 80 for a FIFO queue.
pub(crate) fn valid_queue_name(name: &str) -> bool {
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    (1..=80).contains(&name.len())
        && !stem.is_empty()
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// What a receipt handle names: one receive of one message of one queue.
///
/// Its text is 40 hex digits: the queue's incarnation (so a handle from a deleted queue
/// never matches a new queue of the same name), the message's sequence number and its
/// receive count, which makes it unique per receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReceiptHandle {
    /// The incarnation of the queue.
    pub(crate) incarnation: u64,
    /// The message's sequence number in the queue.
    pub(crate) seq: u64,
    /// The message's receive count at that receive.
    pub(crate) receive_count: u32,
}

impl ReceiptHandle {
    /// Parses the text of a handle; `None` when it is malformed.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        if text.len() != 40 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(Self {
            incarnation: u64::from_str_radix(text.get(..16)?, 16).ok()?,
            seq: u64::from_str_radix(text.get(16..32)?, 16).ok()?,
            receive_count: u32::from_str_radix(text.get(32..)?, 16).ok()?,
        })
    }
}

impl ReceiptHandle {
    /// The text of the handle, as ASCII bytes, without allocating.
    fn encode(&self) -> [u8; 40] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 40];
        let fields = [
            (self.incarnation, 0, 16),
            (self.seq, 16, 16),
            (u64::from(self.receive_count), 32, 8),
        ];
        for (value, offset, digits) in fields {
            for i in 0..digits {
                let shift = 4 * (digits - 1 - i);
                // Masked to 0..16.
                let nibble = usize::try_from((value >> shift) & 0xF).unwrap_or_default();
                text[offset + i] = HEX[nibble];
            }
        }
        text
    }
}

impl fmt::Display for ReceiptHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(std::str::from_utf8(&self.encode()).unwrap_or_default())
    }
}

impl serde::Serialize for ReceiptHandle {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(std::str::from_utf8(&self.encode()).unwrap_or_default())
    }
}

/// Hashes message sequence numbers with one multiplication (Fibonacci hashing), which
/// spreads consecutive numbers over the whole hash. Sequence numbers are the server's own,
/// so no protection against chosen keys is needed.
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

/// How long a FIFO queue remembers a deduplication id.
const DEDUPLICATION_WINDOW: Duration = Duration::from_secs(300);

/// One message group of a FIFO queue.
#[derive(Debug, Default)]
struct Group {
    /// Its messages not deleted yet, in send order.
    pending: VecDeque<u64>,
    /// How many of them are in flight.
    in_flight: usize,
}

/// What only a FIFO queue keeps.
#[derive(Debug, Default)]
struct FifoState {
    /// The groups with messages, by id.
    groups: HashMap<Arc<str>, Group>,
    /// Deduplication ids seen in the window: the message id and sequence number first sent
    /// with each.
    seen: HashMap<String, (String, u64)>,
    /// When each deduplication id of `seen` expires, oldest first.
    expiries: VecDeque<(Instant, String)>,
}

/// What a send to a FIFO queue answers for one message: its id and sequence number (those
/// of the first message sent with its deduplication id, for a duplicate).
#[derive(Debug, Clone)]
pub(crate) struct FifoSent {
    /// The message id.
    pub(crate) id: String,
    /// The sequence number.
    pub(crate) sequence_number: u64,
}

/// What never changes about a message once sent; shared with the answers that carry it.
#[derive(Debug)]
pub(crate) struct MessageData {
    /// The message id.
    pub(crate) id: String,
    /// The body.
    pub(crate) body: String,
    /// MD5 hex of the body.
    pub(crate) md5_of_body: String,
    /// Message attributes.
    pub(crate) attributes: MessageAttributes,
    /// MD5 hex of all the message attributes, when there are any.
    pub(crate) md5_of_attributes: Option<String>,
    /// When it was sent, in epoch milliseconds.
    pub(crate) sent_millis: u64,
    /// When it was sent, by the monotonic clock: its age when it is deleted is measured from
    /// here (see [`Queue::deleted_ages`]).
    pub(crate) sent_at: Instant,
    /// FIFO group id, as sent.
    pub(crate) group_id: Option<String>,
    /// FIFO deduplication id, as sent.
    pub(crate) deduplication_id: Option<String>,
    /// FIFO sequence number (the queue's own sequence number plus one), set when stored; 0 on
    /// a standard queue.
    pub(crate) sequence_number: u64,
}

/// One receive of a message: what a `ReceiveMessage` answer tells of it.
#[derive(Debug)]
pub(crate) struct Delivery {
    /// The message.
    pub(crate) data: Arc<MessageData>,
    /// The handle of this receive.
    pub(crate) handle: ReceiptHandle,
    /// When the message was first received, in epoch milliseconds.
    pub(crate) first_receive_millis: u64,
}

/// Where a stored message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Visibility {
    /// Receivable; its id is in the visible FIFO.
    Visible,
    /// Received, invisible until the deadline.
    InFlight(Instant),
    /// Sent with a delay, invisible until the deadline.
    Delayed(Instant),
}

/// A stored message.
#[derive(Debug)]
struct Stored {
    /// What never changes.
    data: Arc<MessageData>,
    /// How many times it was received.
    receive_count: u32,
    /// When it was first received, in epoch milliseconds.
    first_receive_millis: Option<u64>,
    /// Where it stands.
    visibility: Visibility,
}

/// The settings of a queue that its attributes give, parsed.
#[derive(Debug, Clone, Copy)]
struct Settings {
    /// Default visibility timeout of a receive.
    visibility_timeout: Duration,
    /// Default delay of a send.
    delay: Duration,
    /// Default long-poll wait of a receive, in seconds.
    wait_seconds: i64,
    /// The largest message (body and attributes) accepted, in bytes.
    max_message_size: usize,
}

/// The mutable state of a queue, behind its lock.
#[derive(Debug)]
struct State {
    /// The attributes set on the queue (settable ones only).
    attributes: BTreeMap<&'static str, String>,
    /// What they say, parsed.
    settings: Settings,
    /// When an attribute was last set, in epoch seconds.
    last_modified_secs: u64,
    /// The sequence number of the next message.
    next_seq: u64,
    /// The messages, by sequence number.
    messages: SeqMap<Stored>,
    /// Sequence numbers of visible messages, oldest first; may hold ids of messages deleted
    /// since, which are skipped.
    visible: VecDeque<u64>,
    /// Deadlines of in-flight and delayed messages.
    deadlines: BTreeSet<(Instant, u64)>,
    /// How many messages are visible.
    visible_count: usize,
    /// How many messages are in flight.
    in_flight_count: usize,
    /// How many messages are delayed.
    delayed_count: usize,
    /// The age of each deleted message when its delete was answered, in microseconds.
    deleted_ages: Histogram<u64>,
    /// A FIFO queue's groups and deduplication ids; `None` on a standard queue.
    fifo: Option<Box<FifoState>>,
}

/// The age of the messages a queue deleted, from their `SendMessage` to the answer to their
/// `DeleteMessage` or `DeleteMessageBatch` entry, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeletedAges {
    /// Messages deleted.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

/// The longest age the histogram holds, in microseconds (ten minutes); older ones count as it.
const MAX_AGE_MICROS: u64 = 600_000_000;

/// One queue.
#[derive(Debug)]
pub(crate) struct Queue {
    /// Its name.
    pub(crate) name: String,
    /// Its URL.
    pub(crate) url: String,
    /// Its ARN.
    pub(crate) arn: String,
    /// A number no other queue of this server ever had: part of receipt handles.
    pub(crate) incarnation: u64,
    /// Whether it was created as a FIFO queue (with the FIFO rules of the module's doc).
    pub(crate) fifo: bool,
    /// When it was created, in epoch seconds.
    created_secs: u64,
    /// Its messages and attributes.
    state: Mutex<State>,
    /// Woken when a message may have become receivable sooner than a waiting long poll
    /// expects, and when the queue is deleted.
    changed: Notify,
    /// Set when the queue is deleted.
    deleted: AtomicBool,
}

impl Queue {
    /// A new, empty queue with `attributes` (checked as for `CreateQueue`).
    ///
    /// # Errors
    ///
    /// `InvalidAttributeName` or `InvalidAttributeValue` for attributes that are unknown or
    /// out of range, and `InvalidParameterValue` when the name and `FifoQueue` disagree.
    pub(crate) fn new(
        name: &str,
        base_url: &str,
        incarnation: u64,
        attributes: &HashMap<String, String>,
    ) -> Result<Self, SqsError> {
        let fifo = match attributes.get("FifoQueue").map(String::as_str) {
            None => false,
            Some(value) => parse_bool("FifoQueue", value)?,
        };
        if fifo != name.ends_with(".fifo") {
            return Err(SqsError::new(
                ErrorKind::InvalidParameterValue,
                "a FIFO queue's name must end with `.fifo` and needs the FifoQueue attribute \
                 set to true; no other queue's may",
            ));
        }
        let now_secs = epoch_millis() / 1000;
        let mut state = State {
            attributes: BTreeMap::new(),
            settings: Settings {
                visibility_timeout: Duration::from_secs(30),
                delay: Duration::ZERO,
                wait_seconds: 0,
                max_message_size: 262_144,
            },
            last_modified_secs: now_secs,
            next_seq: 0,
            messages: SeqMap::default(),
            visible: VecDeque::new(),
            deadlines: BTreeSet::new(),
            visible_count: 0,
            in_flight_count: 0,
            delayed_count: 0,
            deleted_ages: Histogram::new_with_bounds(1, MAX_AGE_MICROS, 3)
                .expect("1 µs..=10 min at 3 significant digits are valid histogram bounds"),
            fifo: fifo.then(Box::default),
        };
        let settable: Vec<(&String, &String)> = attributes
            .iter()
            .filter(|(name, _)| name.as_str() != "FifoQueue")
            .collect();
        state.set_attributes(settable)?;
        Ok(Self {
            name: name.to_owned(),
            url: format!("{base_url}/{ACCOUNT_ID}/{name}"),
            arn: format!("arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name}"),
            incarnation,
            fifo,
            created_secs: now_secs,
            state: Mutex::new(state),
            changed: Notify::new(),
            deleted: AtomicBool::new(false),
        })
    }

    /// The queue's state, locked. A poisoned lock is taken over: every mutation keeps the
    /// state consistent step by step, and the server must keep answering.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the queue deleted and wakes its long polls.
    pub(crate) fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// Whether the queue was deleted.
    pub(crate) fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// The notification a long poll waits on.
    pub(crate) fn changed(&self) -> &Notify {
        &self.changed
    }

    /// Whether `requested`, the attributes of a `CreateQueue` for this existing queue, match
    /// what the queue has (so that the create is a no-op); the name of the first that does
    /// not, otherwise.
    pub(crate) fn differing_attribute(
        &self,
        requested: &HashMap<String, String>,
    ) -> Option<String> {
        let state = self.lock();
        requested
            .iter()
            .find(|(name, value)| {
                let current = if name.as_str() == "FifoQueue" {
                    Some(self.fifo.to_string())
                } else {
                    state.attribute(name)
                };
                current.as_deref() != Some(value.as_str())
            })
            .map(|(name, _)| name.clone())
    }

    /// `SetQueueAttributes`.
    ///
    /// # Errors
    ///
    /// As for [`State::set_attributes`]; `FifoQueue` cannot be changed.
    pub(crate) fn set_attributes(
        &self,
        attributes: &HashMap<String, String>,
    ) -> Result<(), SqsError> {
        if attributes.contains_key("FifoQueue") {
            return Err(SqsError::new(
                ErrorKind::InvalidAttributeName,
                "FifoQueue can only be set when the queue is created",
            ));
        }
        let mut state = self.lock();
        state.set_attributes(attributes.iter())?;
        state.last_modified_secs = epoch_millis() / 1000;
        drop(state);
        // A shorter delay or wait does not move existing deadlines, but a long poll waiting
        // with the old settings may as well look again.
        self.changed.notify_waiters();
        Ok(())
    }

    /// `GetQueueAttributes`: the attributes named (or `All`) that the queue has.
    ///
    /// # Errors
    ///
    /// `InvalidAttributeName` for a name that is no queue attribute.
    pub(crate) fn attributes(
        &self,
        names: &[String],
    ) -> Result<BTreeMap<&'static str, String>, SqsError> {
        let all = names.iter().any(|name| name == "All");
        let wanted: Vec<&'static str> = if all {
            SETTABLE_ATTRIBUTES
                .iter()
                .map(|(name, _)| *name)
                .chain(COMPUTED_ATTRIBUTES)
                .collect()
        } else {
            names
                .iter()
                .map(|name| {
                    static_attribute_name(name).ok_or_else(|| {
                        SqsError::new(
                            ErrorKind::InvalidAttributeName,
                            format!("unknown queue attribute `{name}`"),
                        )
                    })
                })
                .collect::<Result<_, _>>()?
        };
        let mut state = self.lock();
        state.release_due(Instant::now());
        let mut out = BTreeMap::new();
        for name in wanted {
            let value = match name {
                "QueueArn" => Some(self.arn.clone()),
                "ApproximateNumberOfMessages" => Some(state.visible_count.to_string()),
                "ApproximateNumberOfMessagesNotVisible" => Some(state.in_flight_count.to_string()),
                "ApproximateNumberOfMessagesDelayed" => Some(state.delayed_count.to_string()),
                "CreatedTimestamp" => Some(self.created_secs.to_string()),
                "LastModifiedTimestamp" => Some(state.last_modified_secs.to_string()),
                // Only FIFO queues have the attribute, as in SQS.
                "FifoQueue" => self.fifo.then(|| "true".to_owned()),
                "ContentBasedDeduplication" if self.fifo => {
                    Some(state.attribute(name).unwrap_or_else(|| "false".to_owned()))
                }
                _ => state.attribute(name),
            };
            if let Some(value) = value {
                out.insert(name, value);
            }
        }
        Ok(out)
    }

    /// The queue's default visibility timeout and long-poll wait (in seconds).
    pub(crate) fn receive_defaults(&self) -> (Duration, i64) {
        let state = self.lock();
        (
            state.settings.visibility_timeout,
            state.settings.wait_seconds,
        )
    }

    /// Checks a message against the queue's limits and prepares it for [`Queue::store`]:
    /// the digests are computed here, outside the lock.
    ///
    /// # Errors
    ///
    /// `InvalidMessageContents` for an empty body or one with characters SQS refuses;
    /// `InvalidParameterValue` for a bad delay, bad attributes, or a message larger than
    /// the queue's `MaximumMessageSize`.
    pub(crate) fn prepare(&self, message: NewMessage) -> Result<Prepared, SqsError> {
        let (settings, fifo) = (self.lock().settings, self.fifo);
        if message.body.is_empty() {
            return Err(SqsError::new(
                ErrorKind::InvalidMessageContents,
                "the message body must not be empty",
            ));
        }
        if !body_characters_allowed(&message.body) {
            return Err(SqsError::new(
                ErrorKind::InvalidMessageContents,
                "the message body contains characters outside the allowed set",
            ));
        }
        let attributes_size = validate_attributes(&message.attributes)?;
        let size = message.body.len() + attributes_size;
        if size > settings.max_message_size {
            return Err(SqsError::new(
                ErrorKind::InvalidParameterValue,
                format!(
                    "the message is {size} bytes long; the queue's limit is {} bytes",
                    settings.max_message_size
                ),
            ));
        }
        let delay = match message.delay_seconds {
            None => settings.delay,
            Some(seconds) if (0..=MAX_DELAY_SECONDS).contains(&seconds) => {
                Duration::from_secs(seconds.unsigned_abs())
            }
            Some(seconds) => {
                return Err(SqsError::new(
                    ErrorKind::InvalidParameterValue,
                    format!(
                        "value {seconds} for parameter DelaySeconds is invalid: it must be \
                         between 0 and {MAX_DELAY_SECONDS}"
                    ),
                ));
            }
        };
        if fifo && message.group_id.is_none() {
            return Err(SqsError::new(
                ErrorKind::MissingParameter,
                "a message sent to a FIFO queue needs a MessageGroupId",
            ));
        }
        let content_based = fifo
            && self
                .lock()
                .attribute("ContentBasedDeduplication")
                .is_some_and(|value| value.eq_ignore_ascii_case("true"));
        if fifo && message.deduplication_id.is_none() && !content_based {
            return Err(SqsError::new(
                ErrorKind::InvalidParameterValue,
                "the queue should either have ContentBasedDeduplication enabled or \
                 MessageDeduplicationId provided explicitly",
            ));
        }
        let md5_of_attributes = md5_of_attributes(
            message
                .attributes
                .iter()
                .map(|(name, value)| (name.as_str(), value)),
        );
        Ok(Prepared {
            data: MessageData {
                id: random_id(),
                md5_of_body: md5_hex(message.body.as_bytes()),
                body: message.body,
                attributes: message.attributes,
                md5_of_attributes,
                sent_millis: epoch_millis(),
                sent_at: Instant::now(),
                group_id: message.group_id,
                deduplication_id: message.deduplication_id,
                sequence_number: 0,
            },
            delay,
        })
    }

    /// Stores prepared messages, all under one lock, and wakes the long polls.
    pub(crate) fn store(&self, prepared: impl IntoIterator<Item = Prepared>) {
        let now = Instant::now();
        let mut state = self.lock();
        for Prepared { data, delay } in prepared {
            state.store(Arc::new(data), now, delay);
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// Stores prepared messages of a FIFO queue, all under one lock, and wakes the long
    /// polls; answers each one's id and sequence number. A message whose deduplication id
    /// (or body, with `ContentBasedDeduplication`) was seen in the last five minutes is not
    /// stored: it answers the first one's.
    pub(crate) fn store_fifo(&self, prepared: impl IntoIterator<Item = Prepared>) -> Vec<FifoSent> {
        let now = Instant::now();
        let mut state = self.lock();
        let mut sent = Vec::new();
        for Prepared { mut data, delay } in prepared {
            let key = data
                .deduplication_id
                .clone()
                .unwrap_or_else(|| format!("body:{}", data.md5_of_body));
            let seq = state.next_seq;
            let Some(fifo) = state.fifo.as_deref_mut() else {
                break;
            };
            while fifo
                .expiries
                .front()
                .is_some_and(|(expiry, _)| *expiry <= now)
            {
                if let Some((_, key)) = fifo.expiries.pop_front() {
                    fifo.seen.remove(&key);
                }
            }
            if let Some((id, sequence_number)) = fifo.seen.get(&key) {
                sent.push(FifoSent {
                    id: id.clone(),
                    sequence_number: *sequence_number,
                });
                continue;
            }
            // Counted from 1: 0 is a standard queue's message.
            let sequence_number = seq + 1;
            fifo.seen
                .insert(key.clone(), (data.id.clone(), sequence_number));
            fifo.expiries.push_back((now + DEDUPLICATION_WINDOW, key));
            let group: Arc<str> = Arc::from(data.group_id.as_deref().unwrap_or_default());
            fifo.groups.entry(group).or_default().pending.push_back(seq);
            data.sequence_number = sequence_number;
            sent.push(FifoSent {
                id: data.id.clone(),
                sequence_number,
            });
            state.store(Arc::new(data), now, delay);
        }
        drop(state);
        self.changed.notify_waiters();
        sent
    }

    /// Receives visible messages into `out` until it holds `max`, making each invisible for
    /// `visibility`.
    /// Also answers the earliest deadline of an invisible message, when there is one: when
    /// a long poll that found nothing should look again.
    pub(crate) fn receive(
        &self,
        max: usize,
        visibility: Duration,
        out: &mut Vec<Delivery>,
    ) -> Option<Instant> {
        let now = Instant::now();
        let now_millis = epoch_millis();
        let mut state = self.lock();
        state.release_due(now);
        if state.fifo.is_some() {
            state.receive_fifo(self.incarnation, max, now + visibility, now_millis, out);
            return state.deadlines.first().map(|(deadline, _)| *deadline);
        }
        while out.len() < max {
            let Some(seq) = state.visible.pop_front() else {
                break;
            };
            let deadline = now + visibility;
            let Some(stored) = state.messages.get_mut(&seq) else {
                continue;
            };
            if stored.visibility != Visibility::Visible {
                continue;
            }
            stored.receive_count = stored.receive_count.saturating_add(1);
            let first_receive_millis = *stored.first_receive_millis.get_or_insert(now_millis);
            stored.visibility = Visibility::InFlight(deadline);
            out.push(Delivery {
                data: Arc::clone(&stored.data),
                handle: ReceiptHandle {
                    incarnation: self.incarnation,
                    seq,
                    receive_count: stored.receive_count,
                },
                first_receive_millis,
            });
            state.deadlines.insert((deadline, seq));
            state.visible_count -= 1;
            state.in_flight_count += 1;
        }
        state.deadlines.first().map(|(deadline, _)| *deadline)
    }

    /// Deletes the message of `handle` when it is its latest receive. A stale handle (the
    /// message was received again since, or is gone) is answered with success and deletes
    /// nothing, as SQS documents ("the request succeeds, but the message might not be
    /// deleted").
    ///
    /// # Errors
    ///
    /// `ReceiptHandleIsInvalid` when the handle is malformed or is of another queue.
    pub(crate) fn delete(&self, handle: &str) -> Result<(), SqsError> {
        let handle = self.check_handle(handle)?;
        let mut state = self.lock();
        let sent_at = match state.messages.get(&handle.seq) {
            Some(stored) if stored.receive_count == handle.receive_count => stored.data.sent_at,
            _ => return Ok(()),
        };
        state.remove(handle.seq);
        let micros = u64::try_from(sent_at.elapsed().as_micros()).unwrap_or(MAX_AGE_MICROS);
        state
            .deleted_ages
            .saturating_record(micros.clamp(1, MAX_AGE_MICROS));
        let fifo = state.fifo.is_some();
        drop(state);
        if fifo {
            // The group's next message may be receivable now.
            self.changed.notify_waiters();
        }
        Ok(())
    }

    /// The ages of the messages deleted so far, from their send to their delete's answer;
    /// `None` when none was deleted.
    pub(crate) fn deleted_ages(&self) -> Option<DeletedAges> {
        let state = self.lock();
        let ages = &state.deleted_ages;
        if ages.is_empty() {
            return None;
        }
        let ms = |micros: u64| micros as f64 / 1000.0;
        Some(DeletedAges {
            count: ages.len(),
            p50_ms: ms(ages.value_at_quantile(0.5)),
            p99_ms: ms(ages.value_at_quantile(0.99)),
            max_ms: ms(ages.max()),
        })
    }

    /// Makes the message of `handle` (its latest receive) visible `timeout` from now.
    ///
    /// # Errors
    ///
    /// `ReceiptHandleIsInvalid` as for [`Queue::delete`]; `MessageNotInflight` when the
    /// message is visible again; `InvalidParameterValue` when `timeout` is out of range.
    pub(crate) fn change_visibility(&self, handle: &str, timeout: i64) -> Result<(), SqsError> {
        let timeout = visibility_timeout("VisibilityTimeout", timeout)?;
        let handle = self.check_handle(handle)?;
        let now = Instant::now();
        let mut state = self.lock();
        state.release_due(now);
        let stored = match state.messages.get_mut(&handle.seq) {
            Some(stored) if stored.receive_count == handle.receive_count => stored,
            _ => return Err(stale_handle()),
        };
        let Visibility::InFlight(old) = stored.visibility else {
            return Err(SqsError::new(
                ErrorKind::MessageNotInflight,
                "the message is not in flight",
            ));
        };
        let deadline = now + timeout;
        stored.visibility = Visibility::InFlight(deadline);
        state.deadlines.remove(&(old, handle.seq));
        state.deadlines.insert((deadline, handle.seq));
        let sooner = deadline < old;
        drop(state);
        if sooner {
            self.changed.notify_waiters();
        }
        Ok(())
    }

    /// Deletes every message.
    pub(crate) fn purge(&self) {
        let mut state = self.lock();
        state.messages = SeqMap::default();
        state.visible = VecDeque::new();
        state.deadlines.clear();
        state.visible_count = 0;
        state.in_flight_count = 0;
        state.delayed_count = 0;
        if let Some(fifo) = state.fifo.as_deref_mut() {
            fifo.groups.clear();
        }
    }

    /// The handle `text` parsed, when it is well formed and of this queue.
    fn check_handle(&self, text: &str) -> Result<ReceiptHandle, SqsError> {
        match ReceiptHandle::parse(text) {
            Some(handle) if handle.incarnation == self.incarnation => Ok(handle),
            _ => Err(SqsError::new(
                ErrorKind::ReceiptHandleIsInvalid,
                format!("the receipt handle `{text}` is not valid for this queue"),
            )),
        }
    }
}

/// A message checked and ready to store.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The message.
    pub(crate) data: MessageData,
    /// How long it stays invisible after the send.
    pub(crate) delay: Duration,
}

/// The error for a visibility change with a handle that is well formed but not the latest of
/// a message that exists.
fn stale_handle() -> SqsError {
    SqsError::new(
        ErrorKind::ReceiptHandleIsInvalid,
        "the receipt handle is not the latest of a message in the queue (deleted, or \
         received again since)",
    )
}

impl State {
    /// Stores a message sent `now` with `delay`.
    fn store(&mut self, data: Arc<MessageData>, now: Instant, delay: Duration) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let visibility = if delay.is_zero() {
            if self.fifo.is_none() {
                self.visible.push_back(seq);
            }
            self.visible_count += 1;
            Visibility::Visible
        } else {
            let deadline = now + delay;
            self.deadlines.insert((deadline, seq));
            self.delayed_count += 1;
            Visibility::Delayed(deadline)
        };
        self.messages.insert(
            seq,
            Stored {
                data,
                receive_count: 0,
                first_receive_millis: None,
                visibility,
            },
        );
    }

    /// A FIFO queue's receive: the groups with no message in flight, oldest first message
    /// first, each handing out its consecutive visible messages from the oldest, into `out`
    /// until it holds `max`; each made invisible until `deadline`.
    fn receive_fifo(
        &mut self,
        incarnation: u64,
        max: usize,
        deadline: Instant,
        now_millis: u64,
        out: &mut Vec<Delivery>,
    ) {
        let Some(fifo) = self.fifo.as_deref_mut() else {
            return;
        };
        let mut ready: Vec<(u64, Arc<str>)> = fifo
            .groups
            .iter()
            .filter(|(_, group)| group.in_flight == 0)
            .filter_map(|(name, group)| Some((*group.pending.front()?, Arc::clone(name))))
            .collect();
        ready.sort_unstable_by_key(|(head, _)| *head);
        for (_, name) in ready {
            if out.len() >= max {
                break;
            }
            let Some(group) = fifo.groups.get_mut(&name) else {
                continue;
            };
            for &seq in &group.pending {
                if out.len() >= max {
                    break;
                }
                let Some(stored) = self.messages.get_mut(&seq) else {
                    break;
                };
                if stored.visibility != Visibility::Visible {
                    break;
                }
                stored.receive_count = stored.receive_count.saturating_add(1);
                let first_receive_millis = *stored.first_receive_millis.get_or_insert(now_millis);
                stored.visibility = Visibility::InFlight(deadline);
                out.push(Delivery {
                    data: Arc::clone(&stored.data),
                    handle: ReceiptHandle {
                        incarnation,
                        seq,
                        receive_count: stored.receive_count,
                    },
                    first_receive_millis,
                });
                self.deadlines.insert((deadline, seq));
                self.visible_count -= 1;
                self.in_flight_count += 1;
                group.in_flight += 1;
            }
        }
    }

    /// Makes visible every in-flight or delayed message whose deadline is not after `now`.
    fn release_due(&mut self, now: Instant) {
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
                    self.in_flight_count -= 1;
                    if let Some(fifo) = self.fifo.as_deref_mut() {
                        let group = stored.data.group_id.as_deref().unwrap_or_default();
                        if let Some(group) = fifo.groups.get_mut(group) {
                            group.in_flight = group.in_flight.saturating_sub(1);
                        }
                    }
                }
                Visibility::Delayed(d) if d == deadline => self.delayed_count -= 1,
                _ => continue,
            }
            stored.visibility = Visibility::Visible;
            if self.fifo.is_none() {
                self.visible.push_back(seq);
            }
            self.visible_count += 1;
        }
    }

    /// Removes message `seq`, wherever it stands.
    fn remove(&mut self, seq: u64) {
        let Some(stored) = self.messages.remove(&seq) else {
            return;
        };
        if let Some(fifo) = self.fifo.as_deref_mut() {
            let name = stored.data.group_id.as_deref().unwrap_or_default();
            if let Some(group) = fifo.groups.get_mut(name) {
                if let Some(at) = group.pending.iter().position(|s| *s == seq) {
                    group.pending.remove(at);
                }
                if matches!(stored.visibility, Visibility::InFlight(_)) {
                    group.in_flight = group.in_flight.saturating_sub(1);
                }
                if group.pending.is_empty() {
                    fifo.groups.remove(name);
                }
            }
        }
        match stored.visibility {
            // Its id stays in the visible FIFO, to be skipped.
            Visibility::Visible => self.visible_count -= 1,
            Visibility::InFlight(deadline) => {
                self.deadlines.remove(&(deadline, seq));
                self.in_flight_count -= 1;
            }
            Visibility::Delayed(deadline) => {
                self.deadlines.remove(&(deadline, seq));
                self.delayed_count -= 1;
            }
        }
        // Give back the memory of a large backlog once it is consumed.
        if self.messages.is_empty() && self.messages.capacity() > 4096 {
            self.messages.shrink_to_fit();
            self.visible.clear();
            self.visible.shrink_to_fit();
            return;
        }
        // Keep the FIFO from filling up with ids of messages deleted while visible.
        if self.visible.len() > 64 && self.visible.len() > 2 * self.visible_count {
            let messages = &self.messages;
            self.visible.retain(|seq| {
                messages
                    .get(seq)
                    .is_some_and(|stored| stored.visibility == Visibility::Visible)
            });
        }
    }

    /// The value of settable attribute `name`: as set, or its default.
    fn attribute(&self, name: &str) -> Option<String> {
        if let Some(value) = self.attributes.get(name) {
            return Some(value.clone());
        }
        SETTABLE_ATTRIBUTES
            .iter()
            .find(|(known, _)| *known == name)
            .and_then(|(_, default)| default.map(str::to_owned))
    }

    /// Checks and stores `attributes`. Nothing is stored when one of them is refused. An
    /// empty value for an attribute with no default (`RedrivePolicy`, `Policy`, …) removes
    /// it.
    ///
    /// # Errors
    ///
    /// `InvalidAttributeName` for a name that is not settable; `InvalidAttributeValue` for
    /// a value out of range or malformed.
    fn set_attributes<'a>(
        &mut self,
        attributes: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Result<(), SqsError> {
        let mut settings = self.settings;
        let mut changes = Vec::new();
        for (name, value) in attributes {
            let Some((name, default)) = SETTABLE_ATTRIBUTES
                .iter()
                .find(|(known, _)| *known == name.as_str())
            else {
                return Err(SqsError::new(
                    ErrorKind::InvalidAttributeName,
                    format!("unknown or read-only queue attribute `{name}`"),
                ));
            };
            match *name {
                "VisibilityTimeout" => {
                    settings.visibility_timeout =
                        Duration::from_secs(ranged(name, value, 0, MAX_VISIBILITY_TIMEOUT)?);
                }
                "DelaySeconds" => {
                    settings.delay =
                        Duration::from_secs(ranged(name, value, 0, MAX_DELAY_SECONDS)?);
                }
                "ReceiveMessageWaitTimeSeconds" => {
                    settings.wait_seconds =
                        i64::try_from(ranged(name, value, 0, 20)?).unwrap_or_default();
                }
                "MaximumMessageSize" => {
                    settings.max_message_size =
                        usize::try_from(ranged(name, value, 1024, 1_048_576)?)
                            .unwrap_or(usize::MAX);
                }
                "MessageRetentionPeriod" => {
                    ranged(name, value, 60, 1_209_600)?;
                }
                "KmsDataKeyReusePeriodSeconds" => {
                    ranged(name, value, 60, 86_400)?;
                }
                "SqsManagedSseEnabled" | "ContentBasedDeduplication" => {
                    parse_bool(name, value)?;
                }
                "RedrivePolicy" | "RedriveAllowPolicy" | "Policy" if !value.is_empty() => {
                    let parsed: Result<serde_json::Map<String, serde_json::Value>, _> =
                        serde_json::from_str(value);
                    if let Err(error) = parsed {
                        return Err(SqsError::new(
                            ErrorKind::InvalidAttributeValue,
                            format!("{name} is not a JSON object: {error}"),
                        ));
                    }
                }
                _ => {}
            }
            changes.push((*name, default.is_none() && value.is_empty(), value.clone()));
        }
        self.settings = settings;
        for (name, remove, value) in changes {
            if remove {
                self.attributes.remove(name);
            } else {
                self.attributes.insert(name, value);
            }
        }
        Ok(())
    }
}

/// The attribute name `name` as a `'static` string, when it is a queue attribute.
fn static_attribute_name(name: &str) -> Option<&'static str> {
    SETTABLE_ATTRIBUTES
        .iter()
        .map(|(known, _)| *known)
        .chain(COMPUTED_ATTRIBUTES)
        .find(|known| *known == name)
}

/// `value` of attribute `name` as an integer in `min..=max`.
fn ranged(name: &str, value: &str, min: i64, max: i64) -> Result<u64, SqsError> {
    match value.trim().parse::<i64>() {
        Ok(number) if (min..=max).contains(&number) => Ok(number.unsigned_abs()),
        _ => Err(SqsError::new(
            ErrorKind::InvalidAttributeValue,
            format!(
                "invalid value `{value}` for {name}: it must be an integer from {min} to {max}"
            ),
        )),
    }
}

/// `value` of attribute `name` as a boolean (`true` or `false`, any case).
fn parse_bool(name: &str, value: &str) -> Result<bool, SqsError> {
    if value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(SqsError::new(
            ErrorKind::InvalidAttributeValue,
            format!("invalid value `{value}` for {name}: it must be true or false"),
        ))
    }
}

/// A visibility timeout parameter `name` of `seconds`, checked.
///
/// # Errors
///
/// `InvalidParameterValue` when it is not in `0..=43200`.
pub(crate) fn visibility_timeout(name: &str, seconds: i64) -> Result<Duration, SqsError> {
    if (0..=MAX_VISIBILITY_TIMEOUT).contains(&seconds) {
        Ok(Duration::from_secs(seconds.unsigned_abs()))
    } else {
        Err(SqsError::new(
            ErrorKind::InvalidParameterValue,
            format!(
                "value {seconds} for parameter {name} is invalid: it must be between 0 and \
                 {MAX_VISIBILITY_TIMEOUT}"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> Queue {
        Queue::new("q", "http://127.0.0.1:1", 7, &HashMap::new()).expect("a valid queue")
    }

    fn send(queue: &Queue, body: &str) {
        let prepared = queue
            .prepare(NewMessage {
                body: body.to_owned(),
                delay_seconds: None,
                attributes: MessageAttributes::new(),
                deduplication_id: None,
                group_id: None,
            })
            .expect("a valid message");
        queue.store([prepared]);
    }

    #[test]
    fn a_receipt_handle_round_trips_through_its_text() {
        let handle = ReceiptHandle {
            incarnation: 3,
            seq: u64::MAX,
            receive_count: 12,
        };
        assert_eq!(ReceiptHandle::parse(&handle.to_string()), Some(handle));
        assert_eq!(ReceiptHandle::parse("nope"), None);
    }

    #[test]
    fn message_ids_look_like_uuids() {
        let id = random_id();
        assert_eq!(id.len(), 36);
        assert_eq!(id.as_bytes()[14], b'4');
        assert_ne!(id, random_id());
    }

    #[test]
    fn queue_names_follow_sqs_rules() {
        assert!(valid_queue_name("orders-1_a"));
        assert!(valid_queue_name("orders.fifo"));
        assert!(!valid_queue_name(""));
        assert!(!valid_queue_name(".fifo"));
        assert!(!valid_queue_name("a b"));
        assert!(!valid_queue_name(&"x".repeat(81)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_received_message_comes_back_after_its_visibility_timeout() {
        let queue = queue();
        send(&queue, "one");
        let mut out = Vec::new();
        let next = queue.receive(10, Duration::from_secs(5), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].handle.receive_count, 1);
        assert!(next.is_some());

        let mut again = Vec::new();
        queue.receive(10, Duration::from_secs(5), &mut again);
        assert!(again.is_empty(), "in flight, not visible");

        tokio::time::advance(Duration::from_secs(5)).await;
        queue.receive(10, Duration::from_secs(5), &mut again);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].handle.receive_count, 2);

        let stale = out[0].handle.to_string();
        queue
            .delete(&stale)
            .expect("a stale handle is answered with success");
        let attributes = queue
            .attributes(&["All".to_owned()])
            .expect("All is a valid name");
        assert_eq!(
            attributes["ApproximateNumberOfMessagesNotVisible"], "1",
            "a stale handle deletes nothing"
        );
        queue
            .delete(&again[0].handle.to_string())
            .expect("the latest handle deletes");
        let attributes = queue
            .attributes(&["All".to_owned()])
            .expect("All is a valid name");
        assert_eq!(attributes["ApproximateNumberOfMessages"], "0");
        assert_eq!(attributes["ApproximateNumberOfMessagesNotVisible"], "0");
    }

    #[tokio::test(start_paused = true)]
    async fn deleted_visible_messages_are_skipped_and_compacted() {
        let queue = queue();
        for i in 0..100 {
            send(&queue, &format!("m{i}"));
        }
        // Visibility 0: received, then visible again at the next look (paused time).
        let mut received = Vec::new();
        for _ in 0..10 {
            let mut out = Vec::new();
            queue.receive(10, Duration::ZERO, &mut out);
            received.extend(out);
        }
        assert_eq!(received.len(), 100);
        queue
            .attributes(&["ApproximateNumberOfMessages".to_owned()])
            .expect("a valid name");
        for delivery in &received[..60] {
            queue
                .delete(&delivery.handle.to_string())
                .expect("the latest handle deletes a visible message");
        }
        assert!(queue.lock().visible.len() < 64, "stale ids were dropped");
        let mut rest = Vec::new();
        for _ in 0..5 {
            let mut out = Vec::new();
            queue.receive(10, Duration::from_secs(60), &mut out);
            rest.extend(out);
        }
        assert_eq!(rest.len(), 40);
        assert!(rest.iter().all(|d| d.handle.receive_count == 2));
    }
}
