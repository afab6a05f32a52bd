//! The queues of the double and the changes applied to them: send, redrive, attributes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::errors::{invalid, not_found};
use super::journal::{Applied, Change};
use super::model::RedrivePolicy;
use super::model::rules::{
    MAX_MESSAGE_ATTRIBUTES, MAX_MESSAGE_BYTES, check_body, check_fifo_ids, check_size,
    valid_attribute_name, valid_queue_name, valid_text,
};
use super::observer::Observer;
use super::queue::{Entry, Queue, Redrive};
use super::sent::SentMessage;
#[cfg(feature = "sns")]
use super::topic::Topic;
use crate::api::{CallError, SendEntry};
use crate::attribute::AttributeValue;
use crate::limits::MAX_VISIBILITY_SECS;

#[derive(Default)]
pub(super) struct State {
    pub(super) queues: HashMap<String, Queue>,
    /// What was applied, in order; `None` unless made [`journaled`](super::InProcessSqs::journaled).
    pub(super) journal: Option<Vec<Applied>>,
    pub(super) next_id: u64,
    pub(super) observer: Option<Arc<dyn Observer>>,
    /// Receives the observer counted and whose delivery has not yet been claimed, by message
    /// id and receive count (unique per receive).
    pub(super) owed: HashSet<(String, u32)>,
    /// Standard queues' duplicate deliveries, once switched on.
    pub(super) duplicates: Option<super::duplicates::Duplicates>,
    /// The queues deleted: every call naming one is refused, as SQS refuses it.
    pub(super) deleted: HashSet<String>,
    /// The topics, by name (feature `sns`).
    #[cfg(feature = "sns")]
    pub(super) topics: HashMap<String, Topic>,
}

impl State {
    /// Notes one applied change in the journal, when there is one.
    pub(super) fn note(&mut self, queue: &str, message_id: &str, change: Change) {
        if let Some(journal) = &mut self.journal {
            journal.push(Applied {
                at: Instant::now(),
                queue: queue.to_owned(),
                message_id: message_id.to_owned(),
                change,
            });
        }
    }

    pub(super) fn queue_or_create(&mut self, name: &str) -> Result<&mut Queue, CallError> {
        if self.deleted.contains(name) {
            return Err(not_found(name));
        }
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
    pub(super) fn send(&mut self, name: &str, entry: &SendEntry) -> Result<String, CallError> {
        let now = Instant::now();
        self.next_id += 1;
        let id = format!("m-{:08}", self.next_id);
        let Some(queue) = self.queues.get_mut(name) else {
            return Err(not_found(name));
        };
        check_body(&entry.body)?;
        if entry.attributes.len() > MAX_MESSAGE_ATTRIBUTES {
            return Err(invalid(
                "InvalidParameterValue",
                format!(
                    "{} message attributes, SQS takes at most {MAX_MESSAGE_ATTRIBUTES}",
                    entry.attributes.len()
                ),
            ));
        }
        for (attribute, value) in &entry.attributes {
            let empty = match &value.value {
                AttributeValue::String(text) => text.is_empty() || !valid_text(text),
                AttributeValue::Binary(bytes) => bytes.is_empty(),
            };
            if !valid_attribute_name(attribute) || empty {
                return Err(invalid(
                    "InvalidParameterValue",
                    format!("message attribute `{attribute}` has no name or value SQS takes"),
                ));
            }
        }
        check_size(entry.size(), MAX_MESSAGE_BYTES)?;
        check_fifo_ids(
            queue.fifo,
            entry.group_id.as_deref(),
            entry.deduplication_id.as_deref(),
            queue.content_deduplication,
        )?;
        let deduplication_id = if queue.fifo {
            let dedup = entry
                .deduplication_id
                .clone()
                .unwrap_or_else(|| format!("content:{}", entry.body));
            if queue.deduplication.seen(&dedup, now).is_some() {
                // SQS answers success and keeps only the first.
                return Ok(id);
            }
            queue.deduplication.remember(dedup.clone(), (), now);
            Some(dedup)
        } else {
            None
        };
        let group_id = entry.group_id.clone();
        queue.sent.push(SentMessage {
            message_id: id.clone(),
            body: entry.body.clone(),
            attributes: entry.attributes.clone(),
            group_id: entry.group_id.clone(),
        });
        let group = queue
            .fifo
            .then(|| Arc::from(entry.group_id.as_deref().unwrap_or_default()));
        queue.messages.store(
            Entry {
                id: id.clone(),
                body: entry.body.clone(),
                attributes: entry.attributes.clone(),
                group: entry.group_id.clone(),
                deduplication_id,
                sequence: self.next_id,
                sent_at: SystemTime::now(),
                counted: false,
            },
            group,
            now,
            Duration::from_secs(u64::from(queue.delay)),
        );
        self.note(name, &id, Change::Sent { group_id });
        Ok(id)
    }

    /// Moves the messages receives on `name` took out by its redrive policy to its
    /// dead-letter queue; the dead-letter queue's name when any moved.
    pub(super) fn dead_letter(&mut self, name: &str, now: Instant) -> Option<String> {
        let queue = self.queues.get_mut(name)?;
        let redrive = queue.redrive.clone()?;
        let moved = queue.messages.take_redriven();
        if moved.is_empty() {
            return None;
        }
        let withdrawn = moved.iter().filter(|m| m.data.counted).count();
        if let Some(observer) = &self.observer {
            for _ in 0..withdrawn {
                observer.consumed();
            }
        }
        for message in &moved {
            self.note(
                name,
                &message.data.id,
                Change::DeadLettered {
                    dead_letter: redrive.dead_letter.clone(),
                },
            );
        }
        let dead_letter = self.queues.get_mut(&redrive.dead_letter)?;
        for mut message in moved {
            // What arrives at the dead-letter queue is in its log, as what is sent to it is.
            dead_letter.sent.push(SentMessage {
                message_id: message.data.id.clone(),
                body: message.data.body.clone(),
                attributes: message.data.attributes.clone(),
                group_id: message.data.group.clone(),
            });
            message.data.counted = false;
            dead_letter.messages.store_redriven(message, now);
        }
        Some(redrive.dead_letter)
    }

    pub(super) fn queue_by_arn(&self, arn: &str) -> Option<&Queue> {
        self.queues.values().find(|queue| queue.arn == arn)
    }

    pub(super) fn set_attributes(
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
                    let policy = RedrivePolicy::parse(value)?;
                    let target = self
                        .queue_by_arn(&policy.dead_letter_arn)
                        .map(|queue| (queue.name.as_str(), queue.fifo));
                    let dead_letter = policy.check_target(name, fifo, target)?.to_owned();
                    redrive = Some(Redrive {
                        dead_letter,
                        max_receive_count: policy.max_receive_count,
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
        if let Some(redrive) = redrive {
            queue
                .messages
                .set_max_receive_count(Some(redrive.max_receive_count));
            queue.redrive = Some(redrive);
        }
        Ok(())
    }
}
