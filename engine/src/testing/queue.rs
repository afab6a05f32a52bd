//! One queue of the double: its settings and its messages, kept in the SQS model
//! ([`Messages`]).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::model::rules::{ACCOUNT_ID, DEDUPLICATION_WINDOW, DEFAULT_VISIBILITY_SECS};
use super::model::{Deduplication, Messages};
use super::receipt::Receipt;
use super::sent::SentMessage;
use crate::api::ReceivedMessage;
use crate::attribute::MessageAttribute;

pub(super) struct Queue {
    pub(super) name: String,
    pub(super) url: String,
    pub(super) arn: String,
    pub(super) fifo: bool,
    pub(super) visibility: u32,
    pub(super) delay: u32,
    pub(super) content_deduplication: bool,
    pub(super) redrive: Option<Redrive>,
    /// The access policy, as it was written: the double keeps it and enforces none of it.
    pub(super) policy: Option<String>,
    pub(super) messages: Messages<Entry>,
    pub(super) deduplication: Deduplication<()>,
    pub(super) sent: Vec<SentMessage>,
    /// The subscriptions reading the queue, oldest first: only a watched queue's messages are
    /// counted, and only the oldest subscription receives (see [`Reader`](super::harness::Reader)).
    pub(super) watchers: Vec<u64>,
    /// On a FIFO queue, what each `ReceiveRequestAttemptId` got, and when.
    pub(super) attempts: HashMap<String, (Instant, Vec<ReceivedMessage>)>,
}

#[derive(Clone)]
pub(super) struct Redrive {
    pub(super) dead_letter: String,
    pub(super) max_receive_count: u32,
}

/// What the double keeps of a message beside what the model keeps (where it stands, its
/// receive count and group).
#[derive(Clone)]
pub(super) struct Entry {
    pub(super) id: String,
    pub(super) body: String,
    pub(super) attributes: Vec<(String, MessageAttribute)>,
    pub(super) group: Option<String>,
    pub(super) deduplication_id: Option<String>,
    /// Its `SequenceNumber` on a FIFO queue: unique across the double, growing with sends.
    pub(super) sequence: u64,
    pub(super) sent_at: SystemTime,
    /// Counted receivable with the observer, and not yet received.
    pub(super) counted: bool,
}

impl Queue {
    pub(super) fn new(name: &str) -> Self {
        let fifo = name.ends_with(".fifo");
        Self {
            name: name.to_owned(),
            url: format!("http://sqs.in-process.invalid/{ACCOUNT_ID}/{name}"),
            arn: format!("arn:aws:sqs:in-process:{ACCOUNT_ID}:{name}"),
            fifo,
            visibility: DEFAULT_VISIBILITY_SECS,
            delay: 0,
            content_deduplication: false,
            redrive: None,
            policy: None,
            messages: Messages::new(fifo),
            deduplication: Deduplication::default(),
            sent: Vec::new(),
            watchers: Vec::new(),
            attempts: HashMap::new(),
        }
    }

    /// What the receive with attempt id `id` got, for its retry within five minutes, if none
    /// of those messages was deleted or changed since (each is still in flight from that
    /// receive). The retry resets their visibility timeout, to `visibility` from `now`, as
    /// SQS does.
    pub(super) fn attempt_again(
        &mut self,
        id: &str,
        now: Instant,
        visibility: Duration,
    ) -> Option<Vec<ReceivedMessage>> {
        self.attempts
            .retain(|_, (at, _)| now.saturating_duration_since(*at) < DEDUPLICATION_WINDOW);
        let (_, received) = self.attempts.get(id)?;
        let receipts: Vec<(u64, u32)> = received
            .iter()
            .map(|message| {
                Receipt::parse(&message.receipt_handle)
                    .filter(|receipt| {
                        self.holds(receipt)
                            && self.messages.in_flight(receipt.seq, receipt.receive_count)
                    })
                    .map(|receipt| (receipt.seq, receipt.receive_count))
            })
            .collect::<Option<_>>()?;
        let received = received.clone();
        for (seq, receive_count) in receipts {
            // Past 12 hours from the receive, SQS refuses; the message keeps its deadline.
            let _ = self
                .messages
                .change_visibility(seq, receive_count, now, visibility);
        }
        Some(received)
    }

    /// Forgets the receives whose messages include the one `handle` names: a message deleted or
    /// changed since makes SQS's retry of that receive get other messages, not the same again.
    pub(super) fn forget_attempts_of(&mut self, handle: &str) {
        self.attempts.retain(|_, (_, received)| {
            received
                .iter()
                .all(|message| message.receipt_handle != handle)
        });
    }

    /// Whether the message `receipt` names is in the queue (under the sequence number the
    /// receipt names, another message may be).
    pub(super) fn holds(&self, receipt: &Receipt<'_>) -> bool {
        self.messages
            .get(receipt.seq)
            .is_some_and(|message| message.data.id == receipt.message_id)
    }
}
