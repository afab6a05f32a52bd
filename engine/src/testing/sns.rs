//! The double's SNS (feature `sns`): topics, queue subscriptions with raw delivery, and
//! `PublishBatch`.
//!
//! A topic publish is written to the topic's log (what `published` on a topic reads) and then,
//! at once and on the caller's thread, to every queue subscribed to the topic, with the same
//! body and message attributes: raw message delivery, the only kind the broker subscribes
//! with. A FIFO topic keeps its message's group and deduplication id on a FIFO queue; a
//! standard queue takes neither. What SNS does asynchronously (delivery retries, a delivery a
//! queue's access policy refuses) is not modelled: the access policy a subscription writes is
//! kept, and delivery does not consult it. LocalStack proves that the grant is needed and
//! suffices.

use super::InProcessSqs;
use super::errors::{invalid, not_found};
use super::model::rules::{ACCOUNT_ID, MAX_MESSAGE_ATTRIBUTES, valid_text};
use super::sent::SentMessage;
use super::store::State;
use super::topic::Topic;
use crate::api::{BoxFuture, CallError, EntryFailure, EntryResult, SendEntry};
use crate::limits::valid_topic_name;
use crate::queue_url::last_segment;
use crate::sqs::sns_api::{MAX_PUBLISH_ENTRIES, MAX_TOPIC_MESSAGE_BYTES, SnsApi};

/// The topic's name in a topic name or ARN.
fn topic_in(topic: &str) -> &str {
    topic.rsplit(':').next().unwrap_or(topic)
}

fn refused(code: &str, message: impl Into<String>) -> EntryResult {
    EntryResult::Failed(EntryFailure {
        code: code.to_owned(),
        sender_fault: true,
        message: Some(message.into()),
    })
}

impl InProcessSqs {
    /// Creates the topic `topic` (a name or ARN) if it is new; its ARN.
    fn topic_or_create(state: &mut State, topic: &str) -> Result<String, CallError> {
        let name = topic_in(topic);
        if !valid_topic_name(name) {
            return Err(invalid(
                "InvalidParameter",
                format!(
                    "`{name}` is not a topic name SNS takes: 1 to 256 letters, digits, `-` and `_`, and `.fifo` for a FIFO topic"
                ),
            ));
        }
        let topic = state
            .topics
            .entry(name.to_owned())
            .or_insert_with(|| Topic {
                arn: format!("arn:aws:sns:in-process:{ACCOUNT_ID}:{name}"),
                fifo: name.ends_with(".fifo"),
                queues: Vec::new(),
                published: Vec::new(),
            });
        Ok(topic.arn.clone())
    }

    /// Subscribes the queue `queue` (a name, URL or ARN) to the topic `topic` (a name or ARN),
    /// creating either when new, as an operator's subscription with raw delivery would.
    ///
    /// # Errors
    ///
    /// A name SNS or SQS refuses; a FIFO queue on a standard topic, which SNS refuses.
    pub fn subscribe_to_topic(&self, topic: &str, queue: &str) -> Result<(), CallError> {
        let mut state = self.shared.lock();
        Self::topic_or_create(&mut state, topic)?;
        let queue = queue.rsplit(':').next().unwrap_or(queue);
        let queue = last_segment(queue).to_owned();
        state.queue_or_create(&queue)?;
        Self::subscribe_locked(&mut state, topic_in(topic), &queue)
    }

    fn subscribe_locked(state: &mut State, topic: &str, queue: &str) -> Result<(), CallError> {
        let queue_fifo = state
            .queues
            .get(queue)
            .ok_or_else(|| not_found(queue))?
            .fifo;
        let topic = state.topics.get_mut(topic).ok_or_else(|| {
            CallError::new(crate::CallErrorKind::Invalid, format!("no topic `{topic}`"))
                .with_code("NotFound".to_owned())
        })?;
        if queue_fifo && !topic.fifo {
            return Err(invalid(
                "InvalidParameter",
                format!("the FIFO queue `{queue}` cannot subscribe to a standard topic"),
            ));
        }
        if !topic.queues.iter().any(|q| q == queue) {
            topic.queues.push(queue.to_owned());
        }
        Ok(())
    }

    /// Every message published to the topic `topic` (a name or ARN), in publish order;
    /// `None` for a topic that does not exist.
    pub fn topic_published(&self, topic: &str) -> Option<Vec<SentMessage>> {
        self.shared
            .lock()
            .topics
            .get(topic_in(topic))
            .map(|topic| topic.published.clone())
    }

    /// The queues subscribed to the topic `topic` (a name or ARN), in subscription order.
    pub fn topic_queues(&self, topic: &str) -> Vec<String> {
        self.shared
            .lock()
            .topics
            .get(topic_in(topic))
            .map(|topic| topic.queues.clone())
            .unwrap_or_default()
    }

    /// A `PublishBatch` to `topic_arn`: the batch refused as SNS refuses one of no entries or
    /// too many, or too long, else each entry published.
    fn publish_batch_now(
        &self,
        topic_arn: &str,
        entries: &[SendEntry],
    ) -> Result<Vec<EntryResult>, CallError> {
        if entries.is_empty() || entries.len() > MAX_PUBLISH_ENTRIES {
            return Err(invalid(
                "TooManyEntriesInBatchRequest",
                format!("{} entries: PublishBatch takes 1 to 10", entries.len()),
            ));
        }
        let total: usize = entries.iter().map(SendEntry::size).sum();
        if total > MAX_TOPIC_MESSAGE_BYTES {
            return Err(invalid(
                "BatchRequestTooLong",
                format!("the batch is {total} bytes, over {MAX_TOPIC_MESSAGE_BYTES}"),
            ));
        }
        let topic = topic_in(topic_arn);
        let mut state = self.shared.lock();
        Ok(entries
            .iter()
            .map(|entry| self.publish_locked(&mut state, topic, entry))
            .collect())
    }

    /// One entry of a `PublishBatch`: checked as SNS checks it, logged, and delivered to
    /// every subscribed queue.
    fn publish_locked(&self, state: &mut State, topic: &str, entry: &SendEntry) -> EntryResult {
        let Some(found) = state.topics.get(topic) else {
            return refused("NotFound", format!("no topic `{topic}`"));
        };
        let fifo = found.fifo;
        if entry.body.is_empty() || !valid_text(&entry.body) {
            return refused(
                "InvalidParameter",
                "the message is empty or not text SNS takes",
            );
        }
        if entry.attributes.len() > MAX_MESSAGE_ATTRIBUTES {
            return refused(
                "InvalidParameter",
                "more message attributes than a queue subscribed with raw delivery takes",
            );
        }
        if entry.size() > MAX_TOPIC_MESSAGE_BYTES {
            return refused(
                "InvalidParameter",
                format!("the message is over {MAX_TOPIC_MESSAGE_BYTES} bytes"),
            );
        }
        if fifo && (entry.group_id.is_none() || entry.deduplication_id.is_none()) {
            return refused(
                "InvalidParameter",
                "a FIFO topic takes a message with a group and a deduplication id",
            );
        }
        if !fifo && entry.deduplication_id.is_some() {
            return refused(
                "InvalidParameter",
                "a standard topic takes no deduplication id",
            );
        }
        state.next_id += 1;
        let id = format!("n-{:08}", state.next_id);
        let queues = found.queues.clone();
        if let Some(found) = state.topics.get_mut(topic) {
            found.published.push(SentMessage {
                message_id: id,
                body: entry.body.clone(),
                attributes: entry.attributes.clone(),
                group_id: entry.group_id.clone(),
            });
        }
        for queue in queues {
            let queue_fifo = state.queues.get(&queue).is_some_and(|q| q.fifo);
            let delivered = if queue_fifo {
                entry.clone()
            } else {
                SendEntry {
                    group_id: None,
                    deduplication_id: None,
                    ..entry.clone()
                }
            };
            // SNS delivers after it answered: a delivery the queue refuses is lost, not the
            // publish's failure.
            let _ = self.send_locked(state, &queue, &delivered);
        }
        EntryResult::Ok
    }
}

impl SnsApi for InProcessSqs {
    fn create_topic<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async move { Self::topic_or_create(&mut self.shared.lock(), name) })
    }

    fn publish_batch<'a>(
        &'a self,
        topic_arn: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        Box::pin(async move { self.publish_batch_now(topic_arn, entries) })
    }

    fn subscribe_queue<'a>(
        &'a self,
        topic_arn: &'a str,
        queue_arn: &'a str,
    ) -> BoxFuture<'a, Result<(), CallError>> {
        Box::pin(async move {
            let mut state = self.shared.lock();
            let queue = state
                .queues
                .values()
                .find(|queue| queue.arn == queue_arn)
                .map(|queue| queue.name.clone())
                .ok_or_else(|| not_found(queue_arn))?;
            Self::subscribe_locked(&mut state, topic_in(topic_arn), &queue)
        })
    }
}
