//! One queue of the double: its settings and its messages, in send order.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::SystemTime;

use tokio::time::Instant;

use super::in_process::SentMessage;
use super::model::Deduplication;
use super::model::rules::{ACCOUNT_ID, DEDUPLICATION_WINDOW, DEFAULT_VISIBILITY_SECS};
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
    pub(super) messages: VecDeque<Stored>,
    pub(super) deduplication: Deduplication<()>,
    pub(super) sent: Vec<SentMessage>,
    /// The subscriptions reading the queue, oldest first: only a watched queue's messages are
    /// counted, and only the oldest subscription receives (see [`Reader`]).
    pub(super) watchers: Vec<u64>,
    /// On a FIFO queue, what each `ReceiveRequestAttemptId` got, and when.
    pub(super) attempts: HashMap<String, (Instant, Vec<ReceivedMessage>)>,
}

#[derive(Clone)]
pub(super) struct Redrive {
    pub(super) dead_letter: String,
    pub(super) max_receive_count: u32,
}

pub(super) struct Stored {
    pub(super) id: String,
    pub(super) body: String,
    pub(super) attributes: Vec<(String, MessageAttribute)>,
    pub(super) group: Option<String>,
    pub(super) deduplication_id: Option<String>,
    pub(super) sequence: u64,
    pub(super) sent_at: SystemTime,
    pub(super) visible_at: Instant,
    pub(super) receive_count: u32,
    pub(super) first_receive: Option<SystemTime>,
    /// The newest receipt handle and when that receive was.
    pub(super) receipt: Option<(String, Instant)>,
    /// Counted receivable with the observer, and not yet received.
    pub(super) counted: bool,
}

impl Stored {
    pub(super) fn in_flight(&self, now: Instant) -> bool {
        self.receipt.is_some() && self.visible_at > now
    }
}

impl Queue {
    pub(super) fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            url: format!("http://sqs.in-process.invalid/{ACCOUNT_ID}/{name}"),
            arn: format!("arn:aws:sqs:in-process:{ACCOUNT_ID}:{name}"),
            fifo: name.ends_with(".fifo"),
            visibility: DEFAULT_VISIBILITY_SECS,
            delay: 0,
            content_deduplication: false,
            redrive: None,
            policy: None,
            messages: VecDeque::new(),
            deduplication: Deduplication::default(),
            sent: Vec::new(),
            watchers: Vec::new(),
            attempts: HashMap::new(),
        }
    }

    /// What the receive with attempt id `id` got, for its retry within five minutes, if none
    /// of those messages was deleted or changed since (each still holds that receipt handle).
    pub(super) fn attempt_again(&mut self, id: &str, now: Instant) -> Option<Vec<ReceivedMessage>> {
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
    pub(super) fn receivable(&self, now: Instant) -> Vec<usize> {
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
