//! One in-memory queue of the server: its attributes, and its messages kept by the engine's
//! SQS model ([`Messages`]), which indexes them so that no call scans the queue.
//!
//! A FIFO queue (a name ending in `.fifo`) keeps, besides, the deduplication ids of the last
//! five minutes: a send whose deduplication id (or, with `ContentBasedDeduplication`, body) was
//! seen is answered with the first message's id and not stored again. Simplified against SQS:
//! deduplication keys on the MD5 of the body rather than its SHA-256, and
//! `ReceiveRequestAttemptId` is ignored. A benchmark target, not a reference implementation.
//!
//! Times that clients see (`SentTimestamp`, `ApproximateFirstReceiveTimestamp`,
//! `CreatedTimestamp`) are wall-clock; visibility and delay deadlines use tokio's clock.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use sqs_engine::testing::model::rules::{
    MAX_DELAY_SECS, MAX_MESSAGE_BYTES, MAX_VISIBILITY_SECS, MAX_WAIT_SECS, check_body, check_delay,
    check_fifo_ids, check_size,
};
use sqs_engine::testing::model::{Deduplication, Messages, Received, RedrivePolicy, Redriven};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::protocol::{
    ACCOUNT_ID, ErrorKind, MessageAttributes, NewMessage, REGION, SqsError, md5_hex,
    md5_of_attributes, validate_attributes,
};
use super::receipt::ReceiptHandle;

pub(crate) use sqs_engine::testing::model::rules::{
    check_visibility as visibility_timeout, valid_queue_name,
};

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

/// The messages one receive moved out by the queue's redrive policy, and where they go.
#[derive(Debug)]
pub(crate) struct DeadLettered {
    /// The dead-letter queue's ARN.
    pub(crate) dead_letter_arn: String,
    /// The messages, oldest first.
    pub(crate) messages: Vec<Redriven<Arc<MessageData>>>,
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
    /// The messages and where each stands.
    messages: Messages<Arc<MessageData>>,
    /// The redrive policy, when one is set: the model moves the messages out, the server
    /// into the dead-letter queue.
    redrive: Option<RedrivePolicy>,
    /// A FIFO queue's deduplication ids, each with the message id and sequence number first
    /// sent with it; `None` on a standard queue.
    deduplication: Option<Box<Deduplication<(String, u64)>>>,
    /// The age of each deleted message when its delete was answered, in microseconds.
    deleted_ages: Histogram<u64>,
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
            messages: Messages::new(fifo),
            redrive: None,
            deduplication: fifo.then(Box::default),
            deleted_ages: Histogram::new_with_bounds(1, MAX_AGE_MICROS, 3)
                .expect("1 µs..=10 min at 3 significant digits are valid histogram bounds"),
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
        state.messages.release_due(Instant::now());
        let counts = state.messages.counts();
        let mut out = BTreeMap::new();
        for name in wanted {
            let value = match name {
                "QueueArn" => Some(self.arn.clone()),
                "ApproximateNumberOfMessages" => Some(counts.visible.to_string()),
                "ApproximateNumberOfMessagesNotVisible" => Some(counts.in_flight.to_string()),
                "ApproximateNumberOfMessagesDelayed" => Some(counts.delayed.to_string()),
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

    /// The messages on the queue: visible, in flight and delayed.
    pub(crate) fn messages_held(&self) -> usize {
        let counts = self.lock().messages.counts();
        counts.visible + counts.in_flight + counts.delayed
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
    /// `MissingParameter` for an empty body; `InvalidMessageContents` for one with characters
    /// SQS refuses;
    /// `InvalidParameterValue` for a bad delay, bad attributes, or a message larger than
    /// the queue's `MaximumMessageSize`.
    pub(crate) fn prepare(&self, message: NewMessage) -> Result<Prepared, SqsError> {
        let (settings, fifo) = (self.lock().settings, self.fifo);
        check_body(&message.body)?;
        let attributes_size = validate_attributes(&message.attributes)?;
        check_size(
            message.body.len() + attributes_size,
            settings.max_message_size,
        )?;
        let delay = match message.delay_seconds {
            None => settings.delay,
            Some(seconds) => check_delay(seconds)?,
        };
        if fifo {
            let content_based = self
                .lock()
                .attribute("ContentBasedDeduplication")
                .is_some_and(|value| value.eq_ignore_ascii_case("true"));
            check_fifo_ids(
                fifo,
                message.group_id.as_deref(),
                message.deduplication_id.as_deref(),
                content_based,
            )?;
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
            state.messages.store(Arc::new(data), None, now, delay);
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
            // Counted from 1: 0 is a standard queue's message.
            let sequence_number = state.messages.next_seq() + 1;
            let Some(deduplication) = state.deduplication.as_deref_mut() else {
                break;
            };
            if let Some((id, sequence_number)) = deduplication.seen(&key, now) {
                sent.push(FifoSent {
                    id: id.clone(),
                    sequence_number: *sequence_number,
                });
                continue;
            }
            deduplication.remember(key, (data.id.clone(), sequence_number), now);
            let group: Arc<str> = Arc::from(data.group_id.as_deref().unwrap_or_default());
            data.sequence_number = sequence_number;
            sent.push(FifoSent {
                id: data.id.clone(),
                sequence_number,
            });
            state
                .messages
                .store(Arc::new(data), Some(group), now, delay);
        }
        drop(state);
        self.changed.notify_waiters();
        sent
    }

    /// Receives visible messages into `out` until it holds `max`, making each invisible for
    /// `visibility`.
    /// Also answers the earliest deadline of an invisible message, when there is one: when
    /// a long poll that found nothing should look again.
    /// A message the redrive policy moves out instead waits for
    /// [`take_dead_lettered`](Self::take_dead_lettered).
    pub(crate) fn receive(
        &self,
        max: usize,
        visibility: Duration,
        out: &mut Vec<Delivery>,
    ) -> Option<Instant> {
        let now = Instant::now();
        let now_millis = epoch_millis();
        let mut state = self.lock();
        let mut received = Vec::with_capacity(max);
        state
            .messages
            .receive(now, now + visibility, now_millis, max, &mut received);
        out.extend(received.into_iter().map(
            |Received {
                 data,
                 seq,
                 receive_count,
                 first_receive_millis,
                 ..
             }| Delivery {
                data,
                handle: ReceiptHandle {
                    incarnation: self.incarnation,
                    seq,
                    receive_count,
                },
                first_receive_millis,
            },
        ));
        state.messages.next_deadline()
    }

    /// The messages receives moved out by the redrive policy since the last call, and the
    /// dead-letter queue they go to.
    pub(crate) fn take_dead_lettered(&self) -> Option<DeadLettered> {
        let mut state = self.lock();
        let messages = state.messages.take_redriven();
        if messages.is_empty() {
            return None;
        }
        let dead_letter_arn = state.redrive.as_ref()?.dead_letter_arn.clone();
        Some(DeadLettered {
            dead_letter_arn,
            messages,
        })
    }

    /// Stores, visible at once, the messages another queue's receive moved out by its redrive
    /// policy, with the receive counts they had there.
    pub(crate) fn store_dead_lettered(&self, messages: Vec<Redriven<Arc<MessageData>>>) {
        let now = Instant::now();
        let mut state = self.lock();
        for message in messages {
            state.messages.store_redriven(message, now);
        }
        drop(state);
        self.changed.notify_waiters();
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
        let Some(data) = state.messages.delete(handle.seq, handle.receive_count) else {
            return Ok(());
        };
        let micros = u64::try_from(data.sent_at.elapsed().as_micros()).unwrap_or(MAX_AGE_MICROS);
        state
            .deleted_ages
            .saturating_record(micros.clamp(1, MAX_AGE_MICROS));
        drop(state);
        if self.fifo {
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
        let sooner = self.lock().messages.change_visibility(
            handle.seq,
            handle.receive_count,
            now,
            timeout,
        )?;
        if sooner {
            self.changed.notify_waiters();
        }
        Ok(())
    }

    /// Deletes every message.
    pub(crate) fn purge(&self) {
        self.lock().messages.purge();
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

impl State {
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
        let mut redrive = None;
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
                    settings.visibility_timeout = Duration::from_secs(ranged(
                        name,
                        value,
                        0,
                        i64::from(MAX_VISIBILITY_SECS),
                    )?);
                }
                "DelaySeconds" => {
                    settings.delay =
                        Duration::from_secs(ranged(name, value, 0, i64::from(MAX_DELAY_SECS))?);
                }
                "ReceiveMessageWaitTimeSeconds" => {
                    settings.wait_seconds =
                        i64::try_from(ranged(name, value, 0, i64::from(MAX_WAIT_SECS))?)
                            .unwrap_or_default();
                }
                "MaximumMessageSize" => {
                    settings.max_message_size = usize::try_from(ranged(
                        name,
                        value,
                        1024,
                        i64::try_from(MAX_MESSAGE_BYTES).unwrap_or(i64::MAX),
                    )?)
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
                "RedrivePolicy" => {
                    redrive = Some(if value.is_empty() {
                        None
                    } else {
                        Some(RedrivePolicy::parse(value)?)
                    });
                }
                "RedriveAllowPolicy" | "Policy" if !value.is_empty() => {
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
        if let Some(redrive) = redrive {
            self.messages
                .set_max_receive_count(redrive.as_ref().map(|policy| policy.max_receive_count));
            self.redrive = redrive;
        }
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
    async fn deleted_visible_messages_leave_the_visible_index() {
        let queue = queue();
        for i in 0..100 {
            send(&queue, &format!("m{i}"));
        }
        // Visibility 1 s: each receive hands out ten new messages; all are visible again a
        // second later.
        let mut received = Vec::new();
        for _ in 0..10 {
            let mut out = Vec::new();
            queue.receive(10, Duration::from_secs(1), &mut out);
            received.extend(out);
        }
        assert_eq!(received.len(), 100);
        tokio::time::advance(Duration::from_secs(1)).await;
        queue
            .attributes(&["ApproximateNumberOfMessages".to_owned()])
            .expect("a valid name");
        for delivery in &received[..60] {
            queue
                .delete(&delivery.handle.to_string())
                .expect("the latest handle deletes a visible message");
        }
        assert_eq!(queue.lock().messages.visible_index_len(), 40);
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
