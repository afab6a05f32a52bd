//! The SQS actions: what each does to the server's queues, from its parsed input to its
//! serialized output. HTTP is [`super::http`]'s business; this module sees JSON bytes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqs_engine::limits::{MAX_BATCH_ENTRIES, MAX_WAIT_SECS};
use sqs_engine::testing::model::RedrivePolicy;
use sqs_engine::testing::model::rules::{self, check_batch_size};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::named::Named;
use super::protocol::{
    BatchOutput, BatchResultEntry, BatchResultErrorEntry, ChangeMessageVisibilityBatchInput,
    ChangeMessageVisibilityInput, CreateQueueInput, DeleteMessageBatchInput, DeleteMessageInput,
    Empty, ErrorKind, GetQueueAttributesInput, GetQueueAttributesOutput, GetQueueUrlInput,
    ListQueuesInput, ListQueuesOutput, MessageAttributeValue, NewMessage, NumberText,
    QueueUrlInput, QueueUrlOutput, ReceiveMessageInput, ReceiveMessageOutput, ReceivedMessage,
    SendMessageBatchInput, SendMessageBatchOutput, SendMessageBatchResultEntry, SendMessageInput,
    SendMessageOutput, SetQueueAttributesInput, SqsError, SystemAttributes, attributes_size,
    input_error, md5_of_attributes, sequence_text,
};
use super::queue::{
    DeadLettered, Delivery, MessageData, Prepared, Queue, valid_queue_name, visibility_timeout,
};

/// The most queue URLs one `ListQueues` answers.
const MAX_LIST_RESULTS: usize = 1000;

/// The actions the server implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// `CreateQueue`.
    CreateQueue,
    /// `GetQueueUrl`.
    GetQueueUrl,
    /// `GetQueueAttributes`.
    GetQueueAttributes,
    /// `SetQueueAttributes`.
    SetQueueAttributes,
    /// `ListQueues`.
    ListQueues,
    /// `PurgeQueue`.
    PurgeQueue,
    /// `DeleteQueue`.
    DeleteQueue,
    /// `SendMessage`.
    SendMessage,
    /// `SendMessageBatch`.
    SendMessageBatch,
    /// `ReceiveMessage`.
    ReceiveMessage,
    /// `DeleteMessage`.
    DeleteMessage,
    /// `DeleteMessageBatch`.
    DeleteMessageBatch,
    /// `ChangeMessageVisibility`.
    ChangeMessageVisibility,
    /// `ChangeMessageVisibilityBatch`.
    ChangeMessageVisibilityBatch,
}

impl Action {
    /// Every action, in the order of their counters.
    pub(crate) const ALL: [Self; 14] = [
        Self::CreateQueue,
        Self::GetQueueUrl,
        Self::GetQueueAttributes,
        Self::SetQueueAttributes,
        Self::ListQueues,
        Self::PurgeQueue,
        Self::DeleteQueue,
        Self::SendMessage,
        Self::SendMessageBatch,
        Self::ReceiveMessage,
        Self::DeleteMessage,
        Self::DeleteMessageBatch,
        Self::ChangeMessageVisibility,
        Self::ChangeMessageVisibilityBatch,
    ];

    /// The action's name, as in `X-Amz-Target: AmazonSQS.<name>`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::CreateQueue => "CreateQueue",
            Self::GetQueueUrl => "GetQueueUrl",
            Self::GetQueueAttributes => "GetQueueAttributes",
            Self::SetQueueAttributes => "SetQueueAttributes",
            Self::ListQueues => "ListQueues",
            Self::PurgeQueue => "PurgeQueue",
            Self::DeleteQueue => "DeleteQueue",
            Self::SendMessage => "SendMessage",
            Self::SendMessageBatch => "SendMessageBatch",
            Self::ReceiveMessage => "ReceiveMessage",
            Self::DeleteMessage => "DeleteMessage",
            Self::DeleteMessageBatch => "DeleteMessageBatch",
            Self::ChangeMessageVisibility => "ChangeMessageVisibility",
            Self::ChangeMessageVisibilityBatch => "ChangeMessageVisibilityBatch",
        }
    }
}

impl Named for Action {
    fn all() -> &'static [Self] {
        &Self::ALL
    }

    fn name_of(self) -> &'static str {
        self.name()
    }
}

/// The server's queues, and what answers the actions on them.
#[derive(Debug)]
pub(crate) struct Sqs {
    /// The endpoint, which queue URLs start with.
    base_url: String,
    /// The queues, by name.
    queues: RwLock<HashMap<String, Arc<Queue>>>,
    /// The incarnation of the next queue created.
    next_incarnation: AtomicU64,
    /// Cancelled when the server shuts down: long polls answer at once.
    stopping: CancellationToken,
    /// Calls answered, by action (in the order of [`Action::ALL`]), errors included.
    calls: [AtomicU64; Action::ALL.len()],
    /// The id of the last request answered.
    last_request_id: AtomicU64,
    /// The latency added to every call.
    pub(crate) delays: super::latency::Delays,
    /// The overload, if any: calls served at once, and their cost.
    pub(crate) overload: super::overload::Gate,
}

impl Sqs {
    /// A server with no queues, whose queue URLs start with `base_url`.
    pub(crate) fn new(base_url: String, stopping: CancellationToken) -> Self {
        Self {
            base_url,
            queues: RwLock::new(HashMap::new()),
            next_incarnation: AtomicU64::new(1),
            stopping,
            calls: std::array::from_fn(|_| AtomicU64::new(0)),
            last_request_id: AtomicU64::new(0),
            delays: super::latency::Delays::new(),
            overload: super::overload::Gate::default(),
        }
    }

    /// A new request id, for the `x-amzn-RequestId` header: a counter, unique in this
    /// server.
    pub(crate) fn next_request_id(&self) -> u64 {
        self.last_request_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Calls answered so far, by action name; actions never called are left out.
    pub(crate) fn call_counts(&self) -> Vec<(&'static str, u64)> {
        Action::ALL
            .iter()
            .zip(&self.calls)
            .map(|(action, count)| (action.name(), count.load(Ordering::Relaxed)))
            .filter(|(_, count)| *count > 0)
            .collect()
    }

    /// Runs `action` on the JSON `body` of its request; answers the JSON body of its
    /// output.
    ///
    /// # Errors
    ///
    /// The SQS error the action answers with.
    pub(crate) async fn call(&self, action: Action, body: &[u8]) -> Result<Vec<u8>, SqsError> {
        self.calls[action.index()].fetch_add(1, Ordering::Relaxed);
        let name = action.name();
        match action {
            Action::CreateQueue => to_json(&self.create_queue(parse(name, body)?)?),
            Action::GetQueueUrl => to_json(&self.get_queue_url(&parse(name, body)?)?),
            Action::GetQueueAttributes => to_json(&self.get_queue_attributes(&parse(name, body)?)?),
            Action::SetQueueAttributes => to_json(&self.set_queue_attributes(&parse(name, body)?)?),
            Action::ListQueues => to_json(&self.list_queues(parse(name, body)?)),
            Action::PurgeQueue => to_json(&self.purge_queue(&parse(name, body)?)?),
            Action::DeleteQueue => to_json(&self.delete_queue(&parse(name, body)?)?),
            Action::SendMessage => to_json(&self.send_message(parse(name, body)?)?),
            Action::SendMessageBatch => to_json(&self.send_message_batch(parse(name, body)?)?),
            Action::ReceiveMessage => self.receive_message(parse(name, body)?).await,
            Action::DeleteMessage => to_json(&self.delete_message(&parse(name, body)?)?),
            Action::DeleteMessageBatch => to_json(&self.delete_message_batch(parse(name, body)?)?),
            Action::ChangeMessageVisibility => {
                to_json(&self.change_message_visibility(&parse(name, body)?)?)
            }
            Action::ChangeMessageVisibilityBatch => {
                to_json(&self.change_message_visibility_batch(parse(name, body)?)?)
            }
        }
    }

    /// The messages on all queues: visible, in flight and delayed.
    pub(crate) fn messages_held(&self) -> usize {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|queue| queue.messages_held())
            .sum()
    }

    /// The ages at deletion of the messages the queue at `url` deleted (see
    /// [`Queue::deleted_ages`]); `None` when it deleted none or does not exist.
    pub(crate) fn deleted_ages(&self, url: &str) -> Option<super::queue::DeletedAges> {
        self.queue(url).ok()?.deleted_ages()
    }

    /// Stores `message` on the queue named `queue`, as a `SendMessage` to it would: what an
    /// SNS subscription delivers goes through the same checks and the same queue model.
    ///
    /// # Errors
    ///
    /// The error a `SendMessage` of the message to the queue would answer with.
    pub(crate) fn deliver(&self, queue: &str, message: NewMessage) -> Result<(), SqsError> {
        let queue = self.queue_named(queue)?;
        let prepared = queue.prepare(message)?;
        if queue.fifo {
            queue.store_fifo([prepared]);
        } else {
            queue.store([prepared]);
        }
        Ok(())
    }

    /// The queue named by the last path segment of `url`.
    fn queue(&self, url: &str) -> Result<Arc<Queue>, SqsError> {
        self.queue_named(sqs_engine::queue_url::last_segment(url))
    }

    /// The queue named `name`.
    fn queue_named(&self, name: &str) -> Result<Arc<Queue>, SqsError> {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
            .ok_or_else(|| {
                SqsError::new(
                    ErrorKind::QueueDoesNotExist,
                    format!("The specified queue `{name}` does not exist."),
                )
            })
    }

    /// `CreateQueue`: creates the queue, or answers the existing one when its attributes
    /// match.
    fn create_queue(&self, input: CreateQueueInput) -> Result<QueueUrlOutput, SqsError> {
        let name = input.queue_name;
        if !valid_queue_name(&name) {
            return Err(SqsError::new(
                ErrorKind::InvalidParameterValue,
                format!(
                    "invalid queue name `{name}`: 1 to 80 letters, digits, `-` and `_`, \
                     with `.fifo` at the end of a FIFO queue's"
                ),
            ));
        }
        let mut queues = self.queues.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(queue) = queues.get(&name) {
            if let Some(attribute) = queue.differing_attribute(&input.attributes) {
                return Err(SqsError::new(
                    ErrorKind::QueueNameExists,
                    format!(
                        "a queue named `{name}` already exists with a different value for \
                         {attribute}"
                    ),
                ));
            }
            return Ok(QueueUrlOutput {
                queue_url: queue.url.clone(),
            });
        }
        let fifo = name.ends_with(".fifo");
        check_dead_letter(&queues, &name, fifo, &input.attributes)?;
        let incarnation = self.next_incarnation.fetch_add(1, Ordering::Relaxed);
        let queue = Queue::new(&name, &self.base_url, incarnation, &input.attributes)?;
        let queue_url = queue.url.clone();
        queues.insert(name, Arc::new(queue));
        Ok(QueueUrlOutput { queue_url })
    }

    /// `GetQueueUrl`.
    fn get_queue_url(&self, input: &GetQueueUrlInput) -> Result<QueueUrlOutput, SqsError> {
        let queue = self.queue_named(&input.queue_name)?;
        Ok(QueueUrlOutput {
            queue_url: queue.url.clone(),
        })
    }

    /// `GetQueueAttributes`.
    fn get_queue_attributes(
        &self,
        input: &GetQueueAttributesInput,
    ) -> Result<GetQueueAttributesOutput, SqsError> {
        let queue = self.queue(&input.queue_url)?;
        Ok(GetQueueAttributesOutput {
            attributes: queue.attributes(&input.attribute_names)?,
        })
    }

    /// `SetQueueAttributes`.
    fn set_queue_attributes(&self, input: &SetQueueAttributesInput) -> Result<Empty, SqsError> {
        let queue = self.queue(&input.queue_url)?;
        {
            let queues = self.queues.read().unwrap_or_else(PoisonError::into_inner);
            check_dead_letter(&queues, &queue.name, queue.fifo, &input.attributes)?;
        }
        queue.set_attributes(&input.attributes)?;
        Ok(Empty {})
    }

    /// Stores in their dead-letter queue the messages a receive on `queue` moved out by its
    /// redrive policy. A dead-letter queue deleted since the policy was set takes nothing: the
    /// messages are gone, with a warning.
    fn dead_letter(&self, queue: &Queue, dead_lettered: DeadLettered) {
        let target = {
            let queues = self.queues.read().unwrap_or_else(PoisonError::into_inner);
            queue_by_arn(&queues, &dead_lettered.dead_letter_arn).cloned()
        };
        match target {
            Some(target) if !target.is_deleted() => {
                target.store_dead_lettered(dead_lettered.messages);
            }
            _ => tracing::warn!(
                queue = queue.name,
                dead_letter = dead_lettered.dead_letter_arn,
                messages = dead_lettered.messages.len(),
                "the dead-letter queue no longer exists: the messages its redrive policy moved \
                 out are lost"
            ),
        }
    }

    /// `ListQueues`: the queues whose name starts with the prefix, in name order, paged
    /// when `MaxResults` is given (the token is the last name of the previous page).
    fn list_queues(&self, input: ListQueuesInput) -> ListQueuesOutput {
        let prefix = input.queue_name_prefix.unwrap_or_default();
        let after = input.next_token.unwrap_or_default();
        let page = input.max_results.map_or(MAX_LIST_RESULTS, |max| {
            usize::try_from(max.clamp(1, 1000)).unwrap_or(MAX_LIST_RESULTS)
        });
        let queues = self.queues.read().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<&String> = queues
            .keys()
            .filter(|name| name.starts_with(&prefix) && name.as_str() > after.as_str())
            .collect();
        names.sort();
        let more = names.len() > page;
        names.truncate(page);
        ListQueuesOutput {
            next_token: (more && input.max_results.is_some())
                .then(|| names.last().map(|name| (*name).clone()))
                .flatten(),
            queue_urls: names
                .into_iter()
                .filter_map(|name| queues.get(name).map(|queue| queue.url.clone()))
                .collect(),
        }
    }

    /// `PurgeQueue`.
    fn purge_queue(&self, input: &QueueUrlInput) -> Result<Empty, SqsError> {
        self.queue(&input.queue_url)?.purge();
        Ok(Empty {})
    }

    /// `DeleteQueue`: the queue and its messages are gone at once; its long polls answer
    /// `QueueDoesNotExist`.
    fn delete_queue(&self, input: &QueueUrlInput) -> Result<Empty, SqsError> {
        let queue = self.queue(&input.queue_url)?;
        let mut queues = self.queues.write().unwrap_or_else(PoisonError::into_inner);
        if queues
            .get(&queue.name)
            .is_some_and(|current| Arc::ptr_eq(current, &queue))
        {
            queues.remove(&queue.name);
        }
        drop(queues);
        queue.mark_deleted();
        Ok(Empty {})
    }

    /// `SendMessage`.
    fn send_message(&self, input: SendMessageInput) -> Result<SendMessageOutput, SqsError> {
        let (queue_url, message) = input.split();
        let queue = self.queue(&queue_url)?;
        let prepared = queue.prepare(message)?;
        let mut output = sent(&prepared.data);
        if queue.fifo {
            if let Some(stored) = queue.store_fifo([prepared]).pop() {
                output.message_id = stored.id;
                output.sequence_number = Some(sequence_text(stored.sequence_number));
            }
        } else {
            queue.store([prepared]);
        }
        Ok(output)
    }

    /// `SendMessageBatch`: each entry is sent or fails on its own.
    fn send_message_batch(
        &self,
        input: SendMessageBatchInput,
    ) -> Result<SendMessageBatchOutput, SqsError> {
        let queue = self.queue(&input.queue_url)?;
        check_batch(input.entries.iter().map(|entry| entry.id.as_str()))?;
        check_batch_size(
            input
                .entries
                .iter()
                .map(|entry| entry.message_body.len() + attributes_size(&entry.message_attributes))
                .sum(),
        )?;
        let mut successful = Vec::with_capacity(input.entries.len());
        let mut failed = Vec::new();
        let mut ready: Vec<Prepared> = Vec::with_capacity(input.entries.len());
        for entry in input.entries {
            let (id, message) = entry.split();
            match queue.prepare(message) {
                Ok(prepared) => {
                    successful.push(SendMessageBatchResultEntry {
                        id,
                        sent: sent(&prepared.data),
                    });
                    ready.push(prepared);
                }
                Err(error) => failed.push(error.into_entry(id)),
            }
        }
        if queue.fifo {
            for (entry, stored) in successful.iter_mut().zip(queue.store_fifo(ready)) {
                entry.sent.message_id = stored.id;
                entry.sent.sequence_number = Some(sequence_text(stored.sequence_number));
            }
        } else {
            queue.store(ready);
        }
        Ok(SendMessageBatchOutput { successful, failed })
    }

    /// `ReceiveMessage`: answers as soon as a message is receivable, or when the wait is
    /// over (or the server stops) with none.
    async fn receive_message(&self, input: ReceiveMessageInput) -> Result<Vec<u8>, SqsError> {
        let queue = self.queue(&input.queue_url)?;
        let max = match input.max_number_of_messages {
            None => 1,
            Some(max @ 1..=10) => usize::try_from(max).unwrap_or(1),
            Some(max) => {
                return Err(SqsError::new(
                    ErrorKind::InvalidParameterValue,
                    format!(
                        "value {max} for parameter MaxNumberOfMessages is invalid: it must be \
                         between 1 and 10"
                    ),
                ));
            }
        };
        let (default_visibility, default_wait) = queue.receive_defaults();
        let visibility = match input.visibility_timeout {
            None => default_visibility,
            Some(seconds) => visibility_timeout("VisibilityTimeout", seconds)?,
        };
        let wait = input.wait_time_seconds.unwrap_or(default_wait);
        if !(0..=i64::from(MAX_WAIT_SECS)).contains(&wait) {
            return Err(SqsError::new(
                ErrorKind::InvalidParameterValue,
                format!(
                    "value {wait} for parameter WaitTimeSeconds is invalid: it must be between \
                     0 and {MAX_WAIT_SECS}"
                ),
            ));
        }
        let give_up = Instant::now() + Duration::from_secs(wait.unsigned_abs());
        let mut deliveries = Vec::with_capacity(max);
        loop {
            // Listen before looking, so that a send between the look and the wait is not
            // missed.
            let changed = queue.changed().notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if queue.is_deleted() {
                return Err(SqsError::new(
                    ErrorKind::QueueDoesNotExist,
                    format!("The specified queue `{}` does not exist.", queue.name),
                ));
            }
            let next_deadline = queue.receive(max, visibility, &mut deliveries);
            if let Some(dead_lettered) = queue.take_dead_lettered() {
                self.dead_letter(&queue, dead_lettered);
            }
            let now = Instant::now();
            if !deliveries.is_empty() || now >= give_up || self.stopping.is_cancelled() {
                break;
            }
            let wake = next_deadline.map_or(give_up, |deadline| deadline.min(give_up));
            tokio::select! {
                () = &mut changed => {}
                () = sleep_until(wake) => {}
                () = self.stopping.cancelled() => {}
            }
        }
        let selection = Selection::new(&input);
        let output = ReceiveMessageOutput {
            messages: deliveries
                .iter()
                .map(|delivery| selection.received(delivery))
                .collect(),
        };
        to_json(&output)
    }

    /// `DeleteMessage`.
    fn delete_message(&self, input: &DeleteMessageInput) -> Result<Empty, SqsError> {
        self.queue(&input.queue_url)?
            .delete(&input.receipt_handle)?;
        Ok(Empty {})
    }

    /// `DeleteMessageBatch`: each entry is deleted or fails on its own.
    fn delete_message_batch(
        &self,
        input: DeleteMessageBatchInput,
    ) -> Result<BatchOutput, SqsError> {
        let queue = self.queue(&input.queue_url)?;
        check_batch(input.entries.iter().map(|entry| entry.id.as_str()))?;
        Ok(batch_output(input.entries.into_iter().map(|entry| {
            let result = queue.delete(&entry.receipt_handle);
            (entry.id, result)
        })))
    }

    /// `ChangeMessageVisibility`.
    fn change_message_visibility(
        &self,
        input: &ChangeMessageVisibilityInput,
    ) -> Result<Empty, SqsError> {
        self.queue(&input.queue_url)?
            .change_visibility(&input.receipt_handle, input.visibility_timeout)?;
        Ok(Empty {})
    }

    /// `ChangeMessageVisibilityBatch`: each entry is changed or fails on its own.
    fn change_message_visibility_batch(
        &self,
        input: ChangeMessageVisibilityBatchInput,
    ) -> Result<BatchOutput, SqsError> {
        let queue = self.queue(&input.queue_url)?;
        check_batch(input.entries.iter().map(|entry| entry.id.as_str()))?;
        Ok(batch_output(input.entries.into_iter().map(|entry| {
            let result = match entry.visibility_timeout {
                Some(timeout) => queue.change_visibility(&entry.receipt_handle, timeout),
                None => Err(SqsError::new(
                    ErrorKind::MissingParameter,
                    "the entry has no VisibilityTimeout",
                )),
            };
            (entry.id, result)
        })))
    }
}

/// What `SendMessage` answers for `data`.
fn sent(data: &MessageData) -> SendMessageOutput {
    SendMessageOutput {
        message_id: data.id.clone(),
        md5_of_message_body: data.md5_of_body.clone(),
        md5_of_message_attributes: data.md5_of_attributes.clone(),
        sequence_number: None,
    }
}

/// The answer of a delete or visibility batch from each entry's id and result.
fn batch_output(results: impl Iterator<Item = (String, Result<(), SqsError>)>) -> BatchOutput {
    let mut successful = Vec::new();
    let mut failed: Vec<BatchResultErrorEntry> = Vec::new();
    for (id, result) in results {
        match result {
            Ok(()) => successful.push(BatchResultEntry { id }),
            Err(error) => failed.push(error.into_entry(id)),
        }
    }
    BatchOutput { successful, failed }
}

/// Checks the entry ids of a batch: 1 to 10 entries, each id 1 to 80 letters, digits, `-`
/// and `_`, no two alike.
/// The queue among `queues` whose ARN is `arn`.
fn queue_by_arn<'a>(queues: &'a HashMap<String, Arc<Queue>>, arn: &str) -> Option<&'a Arc<Queue>> {
    let name = arn.rsplit(':').next()?;
    queues.get(name).filter(|queue| queue.arn == arn)
}

/// Checks the dead-letter queue of the `RedrivePolicy` among `attributes`, if one is set,
/// for queue `name` (FIFO when `fifo`): it must be another queue of the same kind among
/// `queues`. What the policy itself says is checked with the other attributes.
///
/// # Errors
///
/// `InvalidAttributeValue` as [`RedrivePolicy::check_target`] answers it.
fn check_dead_letter(
    queues: &HashMap<String, Arc<Queue>>,
    name: &str,
    fifo: bool,
    attributes: &HashMap<String, String>,
) -> Result<(), SqsError> {
    let Some(value) = attributes
        .get("RedrivePolicy")
        .filter(|value| !value.is_empty())
    else {
        return Ok(());
    };
    let policy = RedrivePolicy::parse(value)?;
    let target = queue_by_arn(queues, &policy.dead_letter_arn)
        .filter(|queue| !queue.is_deleted())
        .map(|queue| (queue.name.as_str(), queue.fifo));
    policy.check_target(name, fifo, target)?;
    Ok(())
}

fn check_batch<'a>(ids: impl ExactSizeIterator<Item = &'a str>) -> Result<(), SqsError> {
    rules::check_batch(ids.len())?;
    let mut seen = HashSet::with_capacity(MAX_BATCH_ENTRIES);
    for id in ids {
        let valid = (1..=80).contains(&id.len())
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(SqsError::new(
                ErrorKind::InvalidBatchEntryId,
                format!("batch entry id `{id}` is invalid: 1 to 80 letters, digits, `-` and `_`"),
            ));
        }
        if !seen.insert(id) {
            return Err(SqsError::new(
                ErrorKind::BatchEntryIdsNotDistinct,
                format!("batch entry id `{id}` is used twice"),
            ));
        }
    }
    Ok(())
}

/// The attributes a `ReceiveMessage` asked for.
#[derive(Debug)]
struct Selection<'a> {
    /// System attributes: all of them, or the names given.
    system: Vec<&'a str>,
    /// Whether all system attributes were asked for.
    all_system: bool,
    /// Message attributes: names, or `prefix.*` patterns.
    message: Vec<&'a str>,
    /// Whether all message attributes were asked for (`All` or `.*`).
    all_message: bool,
}

impl<'a> Selection<'a> {
    /// What `input` asks for.
    fn new(input: &'a ReceiveMessageInput) -> Self {
        let system: Vec<&str> = input
            .attribute_names
            .iter()
            .chain(&input.message_system_attribute_names)
            .map(String::as_str)
            .collect();
        let message: Vec<&str> = input
            .message_attribute_names
            .iter()
            .map(String::as_str)
            .collect();
        Self {
            all_system: system.contains(&"All"),
            system,
            all_message: message.iter().any(|name| *name == "All" || *name == ".*"),
            message,
        }
    }

    /// Whether system attribute `name` was asked for.
    fn wants_system(&self, name: &str) -> bool {
        self.all_system || self.system.contains(&name)
    }

    /// Whether message attribute `name` was asked for.
    fn wants_message(&self, name: &str) -> bool {
        self.all_message
            || self
                .message
                .iter()
                .any(|pattern| match pattern.strip_suffix(".*") {
                    Some(prefix) => name
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.starts_with('.')),
                    None => *pattern == name,
                })
    }

    /// How `delivery` appears in the answer.
    fn received<'d>(&self, delivery: &'d Delivery) -> ReceivedMessage<'d> {
        let data = &*delivery.data;
        let attributes = SystemAttributes {
            sender_id: self
                .wants_system("SenderId")
                .then_some(super::protocol::ACCOUNT_ID),
            sent_timestamp: self
                .wants_system("SentTimestamp")
                .then_some(NumberText(data.sent_millis)),
            approximate_receive_count: self
                .wants_system("ApproximateReceiveCount")
                .then_some(NumberText(u64::from(delivery.handle.receive_count))),
            approximate_first_receive_timestamp: self
                .wants_system("ApproximateFirstReceiveTimestamp")
                .then_some(NumberText(delivery.first_receive_millis)),
            message_group_id: data
                .group_id
                .as_deref()
                .filter(|_| self.wants_system("MessageGroupId")),
            message_deduplication_id: data
                .deduplication_id
                .as_deref()
                .filter(|_| self.wants_system("MessageDeduplicationId")),
            sequence_number: (data.sequence_number > 0 && self.wants_system("SequenceNumber"))
                .then(|| sequence_text(data.sequence_number)),
        };
        let (message_attributes, md5_of_message_attributes) = if self.all_message {
            (
                data.attributes
                    .iter()
                    .map(|(name, value)| (name.as_str(), value))
                    .collect::<BTreeMap<&str, &MessageAttributeValue>>(),
                data.md5_of_attributes.clone(),
            )
        } else {
            let chosen: BTreeMap<&str, &MessageAttributeValue> = data
                .attributes
                .iter()
                .filter(|(name, _)| self.wants_message(name))
                .map(|(name, value)| (name.as_str(), value))
                .collect();
            let md5 = md5_of_attributes(chosen.iter().map(|(name, value)| (*name, *value)));
            (chosen, md5)
        };
        ReceivedMessage {
            message_id: &data.id,
            receipt_handle: delivery.handle,
            md5_of_body: &data.md5_of_body,
            body: &data.body,
            attributes,
            md5_of_message_attributes,
            message_attributes,
        }
    }
}

/// `body` deserialized as the input of `action`.
fn parse<T: DeserializeOwned>(action: &str, body: &[u8]) -> Result<T, SqsError> {
    // The SDK sends `{}` for an input with no members; an empty body means the same.
    let body = if body.is_empty() {
        b"{}".as_slice()
    } else {
        body
    };
    serde_json::from_slice(body).map_err(|error| input_error(action, &error))
}

/// `output` serialized.
fn to_json<T: Serialize>(output: &T) -> Result<Vec<u8>, SqsError> {
    serde_json::to_vec(output).map_err(|error| {
        SqsError::new(
            ErrorKind::Serialization,
            format!("serializing the answer failed: {error}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_is_found_by_its_name() {
        for action in Action::ALL {
            assert_eq!(Action::from_name(action.name()), Some(action));
        }
        assert_eq!(Action::from_name("TagQueue"), None);
    }

    #[test]
    fn batches_need_one_to_ten_distinct_valid_ids() {
        assert!(check_batch(["a", "b-1", "c_2"].into_iter()).is_ok());
        let kind = |ids: &[&str]| check_batch(ids.iter().copied()).map_err(|e| e.kind);
        assert_eq!(kind(&[]), Err(ErrorKind::EmptyBatchRequest));
        assert_eq!(
            kind(&["a"; 11]),
            Err(ErrorKind::TooManyEntriesInBatchRequest)
        );
        assert_eq!(kind(&["a", "a"]), Err(ErrorKind::BatchEntryIdsNotDistinct));
        assert_eq!(kind(&["a b"]), Err(ErrorKind::InvalidBatchEntryId));
    }

    #[test]
    fn message_attribute_patterns_match_names_and_prefixes() {
        let input: ReceiveMessageInput =
            serde_json::from_str(r#"{"QueueUrl":"q","MessageAttributeNames":["exact","trace.*"]}"#)
                .expect("valid input");
        let selection = Selection::new(&input);
        assert!(selection.wants_message("exact"));
        assert!(selection.wants_message("trace.id"));
        assert!(!selection.wants_message("tracer"));
        assert!(!selection.wants_message("other"));
        assert!(!selection.wants_system("SentTimestamp"));
    }
}
