//! A minimal SNS beside the embedded SQS: topics whose subscriptions deliver to the server's
//! own queues, answering the SNS actions the RustStream brokers call in the AWS Query protocol
//! ([`super::query`]).
//!
//! What it implements: `CreateTopic` (idempotent; `FifoTopic`), `GetTopicAttributes`,
//! `DeleteTopic`, `Subscribe` with protocol `sqs` (idempotent for the same queue and
//! attributes; `RawMessageDelivery` is the one attribute taken), `SetSubscriptionAttributes`
//! (`RawMessageDelivery`), `Publish` and `PublishBatch` (up to ten entries, each answered on its
//! own). A publish is delivered at once, before the answer, to every queue subscribed: with raw
//! delivery as a `SendMessage` of the same body and message attributes would store it (the
//! group and deduplication id of a FIFO topic's publish passed on), otherwise as the JSON
//! notification of [`super::envelope`] with no message attributes of its own.
//!
//! What it does not: queue policies (a subscription delivers whatever the queue's `Policy`
//! says), filter policies, subscription confirmation, retries of a failed delivery (a delivery
//! the queue refuses, or to a queue deleted since, is logged and lost, as SNS loses it after its
//! retries), other protocols, tags, and any other action (answered with `InvalidAction`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use sqs_engine::limits::valid_topic_name;
use tracing::warn;

use super::actions::Sqs;
use super::envelope::{Published, notification};
use super::named::Named;
use super::protocol::{
    ACCOUNT_ID, MessageAttributeValue, MessageAttributes, NewMessage, REGION, attributes_size,
};
use super::query::{Form, QueryError, answer, escape};
use super::queue::{epoch_millis, random_id};

/// The most entries in one `PublishBatch`.
pub(crate) const MAX_PUBLISH_ENTRIES: usize = 10;

/// The most bytes of a message and its attributes, and of a whole `PublishBatch`.
const MAX_PUBLISH_BYTES: usize = 262_144;

/// The SNS actions the server implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SnsAction {
    /// `CreateTopic`.
    CreateTopic,
    /// `GetTopicAttributes`.
    GetTopicAttributes,
    /// `DeleteTopic`.
    DeleteTopic,
    /// `Subscribe`.
    Subscribe,
    /// `SetSubscriptionAttributes`.
    SetSubscriptionAttributes,
    /// `Publish`.
    Publish,
    /// `PublishBatch`.
    PublishBatch,
}

impl SnsAction {
    /// Every action, in the order of their counters.
    pub(crate) const ALL: [Self; 7] = [
        Self::CreateTopic,
        Self::GetTopicAttributes,
        Self::DeleteTopic,
        Self::Subscribe,
        Self::SetSubscriptionAttributes,
        Self::Publish,
        Self::PublishBatch,
    ];

    /// The action's name, as in the request's `Action` field.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::CreateTopic => "CreateTopic",
            Self::GetTopicAttributes => "GetTopicAttributes",
            Self::DeleteTopic => "DeleteTopic",
            Self::Subscribe => "Subscribe",
            Self::SetSubscriptionAttributes => "SetSubscriptionAttributes",
            Self::Publish => "Publish",
            Self::PublishBatch => "PublishBatch",
        }
    }
}

impl Named for SnsAction {
    fn all() -> &'static [Self] {
        &Self::ALL
    }

    fn name_of(self) -> &'static str {
        self.name()
    }
}

/// A subscription of a queue to a topic.
#[derive(Debug, Clone)]
struct Subscription {
    /// Its ARN: the topic's, a colon, an id.
    arn: String,
    /// The queue's ARN, as subscribed.
    endpoint: String,
    /// The queue's name (the ARN's last part).
    queue: String,
    /// Whether the queue gets the message as published rather than in the JSON envelope.
    raw: bool,
}

/// A topic.
#[derive(Debug)]
struct Topic {
    /// Its ARN.
    arn: String,
    /// Whether it is a FIFO topic.
    fifo: bool,
    /// Its subscriptions, in the order they were made.
    subscriptions: Vec<Subscription>,
}

/// The server's topics, and what answers the SNS actions on them.
#[derive(Debug)]
pub(crate) struct Sns {
    /// The queues subscriptions deliver to.
    sqs: Arc<Sqs>,
    /// The topics, by name.
    topics: RwLock<HashMap<String, Topic>>,
    /// Calls answered, by action (in the order of [`SnsAction::ALL`]), errors included.
    calls: [AtomicU64; SnsAction::ALL.len()],
}

/// A message to publish: what `Publish` and a `PublishBatch` entry share.
#[derive(Debug)]
struct Publish {
    message: String,
    subject: Option<String>,
    attributes: MessageAttributes,
    group_id: Option<String>,
    deduplication_id: Option<String>,
}

impl Sns {
    /// No topics; subscriptions deliver to the queues of `sqs`.
    pub(crate) fn new(sqs: Arc<Sqs>) -> Self {
        Self {
            sqs,
            topics: RwLock::new(HashMap::new()),
            calls: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Calls answered so far, by action name; actions never called are left out.
    pub(crate) fn call_counts(&self) -> Vec<(&'static str, u64)> {
        SnsAction::ALL
            .iter()
            .zip(&self.calls)
            .map(|(action, count)| (action.name(), count.load(Ordering::Relaxed)))
            .filter(|(_, count)| *count > 0)
            .collect()
    }

    /// Runs the action the form's `Action` field names; answers the XML body of its result.
    ///
    /// # Errors
    ///
    /// The SNS error the action answers with; `InvalidAction` for an action the server does
    /// not implement (not counted).
    pub(crate) fn call(&self, form: &Form, request_id: u64) -> Result<Vec<u8>, QueryError> {
        let name = form.get("Action").unwrap_or_default();
        let action = SnsAction::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = SnsAction::ALL.iter().map(|a| a.name()).collect();
            QueryError::sender(
                "InvalidAction",
                format!(
                    "the embedded server's SNS does not implement `{name}`; it implements {}",
                    known.join(", ")
                ),
            )
        })?;
        self.calls[action.index()].fetch_add(1, Ordering::Relaxed);
        let result = match action {
            SnsAction::CreateTopic => self.create_topic(form)?,
            SnsAction::GetTopicAttributes => self.get_topic_attributes(form)?,
            SnsAction::DeleteTopic => self.delete_topic(form)?,
            SnsAction::Subscribe => self.subscribe(form)?,
            SnsAction::SetSubscriptionAttributes => self.set_subscription_attributes(form)?,
            SnsAction::Publish => self.publish(form)?,
            SnsAction::PublishBatch => self.publish_batch(form)?,
        };
        Ok(answer(action.name(), &result, request_id))
    }

    /// The topics, read.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Topic>> {
        self.topics.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The topics, for a change.
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Topic>> {
        self.topics.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// `CreateTopic`: the topic of that name, created when missing.
    fn create_topic(&self, form: &Form) -> Result<String, QueryError> {
        let name = form.required("Name")?;
        let mut fifo = false;
        for (attribute, value) in form.map("Attributes", "key", "value") {
            match attribute.as_str() {
                "FifoTopic" => fifo = parse_bool(&attribute, &value)?,
                // Settings that change nothing the embedded server does.
                "DisplayName" | "Policy" | "ContentBasedDeduplication" => {}
                _ => {
                    return Err(QueryError::invalid_parameter(format!(
                        "Attributes: the embedded server's SNS does not take `{attribute}`"
                    )));
                }
            }
        }
        if !valid_topic_name(name) || fifo != name.ends_with(".fifo") {
            return Err(QueryError::invalid_parameter(format!(
                "invalid topic name `{name}`: 1 to 256 letters, digits, `-` and `_`, with \
                 `.fifo` at the end of a FIFO topic's (FifoTopic=true) and only there"
            )));
        }
        let mut topics = self.write();
        let topic = topics.entry(name.to_owned()).or_insert_with(|| Topic {
            arn: format!("arn:aws:sns:{REGION}:{ACCOUNT_ID}:{name}"),
            fifo,
            subscriptions: Vec::new(),
        });
        Ok(format!("<TopicArn>{}</TopicArn>", escape(&topic.arn)))
    }

    /// The name of the topic `arn` names, when it exists.
    fn topic_name<'a>(&self, arn: &'a str) -> Result<&'a str, QueryError> {
        let name = arn.rsplit(':').next().unwrap_or_default();
        if self.read().get(name).is_some_and(|topic| topic.arn == arn) {
            Ok(name)
        } else {
            Err(QueryError::not_found(format!(
                "Topic does not exist: {arn}"
            )))
        }
    }

    /// `GetTopicAttributes`.
    fn get_topic_attributes(&self, form: &Form) -> Result<String, QueryError> {
        let name = self.topic_name(form.required("TopicArn")?)?;
        let topics = self.read();
        let topic = topics
            .get(name)
            .ok_or_else(|| QueryError::not_found("Topic does not exist"))?;
        let mut attributes = vec![
            ("TopicArn", topic.arn.clone()),
            ("Owner", ACCOUNT_ID.to_owned()),
            ("DisplayName", String::new()),
            (
                "SubscriptionsConfirmed",
                topic.subscriptions.len().to_string(),
            ),
            ("SubscriptionsPending", "0".to_owned()),
            ("SubscriptionsDeleted", "0".to_owned()),
        ];
        if topic.fifo {
            attributes.push(("FifoTopic", "true".to_owned()));
        }
        let mut xml = String::from("<Attributes>");
        for (key, value) in attributes {
            let _ = write!(
                xml,
                "<entry><key>{key}</key><value>{}</value></entry>",
                escape(&value)
            );
        }
        xml.push_str("</Attributes>");
        Ok(xml)
    }

    /// `DeleteTopic`: the topic and its subscriptions are gone; deleting a topic that does
    /// not exist succeeds, as in SNS.
    fn delete_topic(&self, form: &Form) -> Result<String, QueryError> {
        let arn = form.required("TopicArn")?;
        let name = arn.rsplit(':').next().unwrap_or_default();
        let mut topics = self.write();
        if topics.get(name).is_some_and(|topic| topic.arn == arn) {
            topics.remove(name);
        }
        Ok(String::new())
    }

    /// `Subscribe`: a queue (protocol `sqs`, endpoint its ARN) to a topic. The same queue
    /// with the same attributes answers the existing subscription; with other attributes it
    /// is refused, as SNS refuses it.
    fn subscribe(&self, form: &Form) -> Result<String, QueryError> {
        let topic_arn = form.required("TopicArn")?;
        let protocol = form.required("Protocol")?;
        if protocol != "sqs" {
            return Err(QueryError::invalid_parameter(format!(
                "Invalid parameter: the embedded server's SNS delivers to protocol `sqs` only, \
                 not `{protocol}`"
            )));
        }
        let endpoint = form.required("Endpoint")?;
        let Some(queue) = endpoint
            .strip_prefix("arn:aws:sqs:")
            .and_then(|rest| rest.rsplit(':').next())
            .filter(|queue| !queue.is_empty())
        else {
            return Err(QueryError::invalid_parameter(format!(
                "Invalid parameter: SQS endpoint ARN `{endpoint}`"
            )));
        };
        let mut raw = false;
        for (attribute, value) in form.map("Attributes", "key", "value") {
            raw = subscription_attribute(&attribute, &value)?;
        }
        let name = self.topic_name(topic_arn)?;
        let mut topics = self.write();
        let topic = topics
            .get_mut(name)
            .ok_or_else(|| QueryError::not_found("Topic does not exist"))?;
        if queue.ends_with(".fifo") && !topic.fifo {
            return Err(QueryError::invalid_parameter(
                "Invalid parameter: a FIFO queue cannot subscribe to a standard topic",
            ));
        }
        if let Some(existing) = topic
            .subscriptions
            .iter()
            .find(|subscription| subscription.endpoint == endpoint)
        {
            if existing.raw != raw {
                return Err(QueryError::invalid_parameter(
                    "Invalid parameter: Attributes Reason: Subscription already exists with \
                     different attributes",
                ));
            }
            return Ok(format!(
                "<SubscriptionArn>{}</SubscriptionArn>",
                escape(&existing.arn)
            ));
        }
        let subscription = Subscription {
            arn: format!("{}:{}", topic.arn, random_id()),
            endpoint: endpoint.to_owned(),
            queue: queue.to_owned(),
            raw,
        };
        let answer = format!(
            "<SubscriptionArn>{}</SubscriptionArn>",
            escape(&subscription.arn)
        );
        topic.subscriptions.push(subscription);
        Ok(answer)
    }

    /// `SetSubscriptionAttributes`: `RawMessageDelivery` only.
    fn set_subscription_attributes(&self, form: &Form) -> Result<String, QueryError> {
        let arn = form.required("SubscriptionArn")?;
        let attribute = form.required("AttributeName")?;
        let raw = subscription_attribute(attribute, form.get("AttributeValue").unwrap_or(""))?;
        let mut topics = self.write();
        let subscription = topics
            .values_mut()
            .flat_map(|topic| topic.subscriptions.iter_mut())
            .find(|subscription| subscription.arn == arn)
            .ok_or_else(|| QueryError::not_found(format!("Subscription does not exist: {arn}")))?;
        subscription.raw = raw;
        Ok(String::new())
    }

    /// `Publish`: delivered to every subscribed queue before the answer.
    fn publish(&self, form: &Form) -> Result<String, QueryError> {
        let topic_arn = form
            .get("TopicArn")
            .or_else(|| form.get("TargetArn"))
            .unwrap_or_default();
        let (fifo, subscriptions) = self.subscriptions(topic_arn)?;
        let message = read_publish(form, "")?;
        check_publish(&message, fifo)?;
        let id = self.deliver(topic_arn, &subscriptions, &message);
        Ok(format!("<MessageId>{id}</MessageId>"))
    }

    /// `PublishBatch`: each entry is published or fails on its own.
    fn publish_batch(&self, form: &Form) -> Result<String, QueryError> {
        let topic_arn = form.required("TopicArn")?;
        let (fifo, subscriptions) = self.subscriptions(topic_arn)?;
        let members = form.members("PublishBatchRequestEntries");
        match members.len() {
            0 => {
                return Err(QueryError::sender(
                    "EmptyBatchRequest",
                    "The batch request doesn't contain any entries",
                ));
            }
            n if n > MAX_PUBLISH_ENTRIES => {
                return Err(QueryError::sender(
                    "TooManyEntriesInBatchRequest",
                    format!(
                        "The batch request contains {n} entries; at most \
                         {MAX_PUBLISH_ENTRIES} are allowed"
                    ),
                ));
            }
            _ => {}
        }
        let mut ids = HashSet::new();
        let mut entries = Vec::with_capacity(members.len());
        let mut size = 0;
        for member in &members {
            let id = form.get(&format!("{member}Id")).unwrap_or_default();
            let valid = (1..=80).contains(&id.len())
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !valid {
                return Err(QueryError::sender(
                    "InvalidBatchEntryId",
                    format!(
                        "The batch entry id `{id}` is invalid: 1 to 80 letters, digits, `-` and `_`"
                    ),
                ));
            }
            if !ids.insert(id) {
                return Err(QueryError::sender(
                    "BatchEntryIdsNotDistinct",
                    format!("Two or more batch entries have the id `{id}`"),
                ));
            }
            let message = read_publish(form, member);
            if let Ok(message) = &message {
                size += message_size(message);
            }
            entries.push((id, message));
        }
        if size > MAX_PUBLISH_BYTES {
            return Err(QueryError::sender(
                "BatchRequestTooLong",
                format!(
                    "The batch request is {size} bytes long; at most {MAX_PUBLISH_BYTES} are allowed"
                ),
            ));
        }
        let mut successful = String::from("<Successful>");
        let mut failed = String::from("<Failed>");
        for (id, message) in entries {
            let checked = message.and_then(|message| {
                check_publish(&message, fifo)?;
                Ok(message)
            });
            match checked {
                Ok(message) => {
                    let message_id = self.deliver(topic_arn, &subscriptions, &message);
                    let _ = write!(
                        successful,
                        "<member><Id>{}</Id><MessageId>{message_id}</MessageId></member>",
                        escape(id)
                    );
                }
                Err(error) => {
                    let _ = write!(
                        failed,
                        "<member><Id>{}</Id><Code>{}</Code><Message>{}</Message>\
                         <SenderFault>{}</SenderFault></member>",
                        escape(id),
                        error.code,
                        escape(&error.message),
                        error.sender_fault
                    );
                }
            }
        }
        successful.push_str("</Successful>");
        failed.push_str("</Failed>");
        Ok(successful + &failed)
    }

    /// Whether the topic `arn` names is FIFO, and its subscriptions.
    fn subscriptions(&self, arn: &str) -> Result<(bool, Vec<Subscription>), QueryError> {
        let name = arn.rsplit(':').next().unwrap_or_default();
        self.read()
            .get(name)
            .filter(|topic| topic.arn == arn)
            .map(|topic| (topic.fifo, topic.subscriptions.clone()))
            .ok_or_else(|| QueryError::not_found(format!("Topic does not exist: {arn}")))
    }

    /// Delivers `message` to each subscription's queue; answers the message id. A delivery
    /// the queue refuses is logged and lost.
    fn deliver(
        &self,
        topic_arn: &str,
        subscriptions: &[Subscription],
        message: &Publish,
    ) -> String {
        let id = random_id();
        let published_millis = epoch_millis();
        for subscription in subscriptions {
            let delivered = if subscription.raw {
                NewMessage {
                    body: message.message.clone(),
                    delay_seconds: None,
                    attributes: message.attributes.clone(),
                    deduplication_id: message.deduplication_id.clone(),
                    group_id: message.group_id.clone(),
                }
            } else {
                NewMessage {
                    body: notification(&Published {
                        message_id: &id,
                        topic_arn,
                        subscription_arn: &subscription.arn,
                        subject: message.subject.as_deref(),
                        message: &message.message,
                        attributes: &message.attributes,
                        published_millis,
                    }),
                    delay_seconds: None,
                    attributes: MessageAttributes::new(),
                    deduplication_id: message.deduplication_id.clone(),
                    group_id: message.group_id.clone(),
                }
            };
            if let Err(error) = self.sqs.deliver(&subscription.queue, delivered) {
                warn!(
                    %error,
                    topic = topic_arn,
                    queue = subscription.queue,
                    "a topic's delivery to a subscribed queue failed; the message is lost for it"
                );
            }
        }
        id
    }
}

/// Reads the message of a `Publish` (`prefix` empty) or of a `PublishBatch` entry (`prefix`
/// its member's, e.g. `PublishBatchRequestEntries.member.1.`).
fn read_publish(form: &Form, prefix: &str) -> Result<Publish, QueryError> {
    let field = |name: &str| form.get(&format!("{prefix}{name}")).map(str::to_owned);
    let message = field("Message")
        .filter(|message| !message.is_empty())
        .ok_or_else(|| QueryError::invalid_parameter("Invalid parameter: Empty message"))?;
    if field("MessageStructure").is_some() {
        return Err(QueryError::invalid_parameter(
            "MessageStructure: the embedded server's SNS publishes one message to every protocol",
        ));
    }
    let mut attributes = BTreeMap::new();
    for n in 1.. {
        let entry = format!("{prefix}MessageAttributes.entry.{n}.");
        let Some(name) = form.get(&format!("{entry}Name")) else {
            break;
        };
        let value = |member: &str| {
            form.get(&format!("{entry}Value.{member}"))
                .map(str::to_owned)
        };
        let data_type = value("DataType").ok_or_else(|| {
            QueryError::sender(
                "ParameterValueInvalid",
                format!("The message attribute '{name}' must contain a non-empty message attribute type."),
            )
        })?;
        attributes.insert(
            name.to_owned(),
            MessageAttributeValue {
                data_type,
                string_value: value("StringValue"),
                binary_value: value("BinaryValue"),
                string_list_values: None,
                binary_list_values: None,
            },
        );
    }
    Ok(Publish {
        message,
        subject: field("Subject"),
        attributes,
        group_id: field("MessageGroupId"),
        deduplication_id: field("MessageDeduplicationId"),
    })
}

/// The bytes a message counts against the size limit: its body and its attributes' names,
/// types and values.
fn message_size(message: &Publish) -> usize {
    message.message.len() + attributes_size(&message.attributes)
}

/// Checks a message against the topic: its size, and a FIFO topic's group.
fn check_publish(message: &Publish, fifo: bool) -> Result<(), QueryError> {
    let size = message_size(message);
    if size > MAX_PUBLISH_BYTES {
        return Err(QueryError::invalid_parameter(format!(
            "Invalid parameter: Message too long ({size} bytes; at most {MAX_PUBLISH_BYTES})"
        )));
    }
    if fifo && message.group_id.is_none() {
        return Err(QueryError::invalid_parameter(
            "Invalid parameter: The MessageGroupId parameter is required for FIFO topics",
        ));
    }
    Ok(())
}

/// A subscription attribute: `RawMessageDelivery` is the one taken; answers its value.
fn subscription_attribute(name: &str, value: &str) -> Result<bool, QueryError> {
    if name != "RawMessageDelivery" {
        return Err(QueryError::invalid_parameter(format!(
            "Invalid parameter: AttributeName: the embedded server's SNS takes RawMessageDelivery \
             only, not `{name}`"
        )));
    }
    parse_bool(name, value)
}

/// `true` or `false`, in any case.
fn parse_bool(name: &str, value: &str) -> Result<bool, QueryError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(QueryError::invalid_parameter(format!(
            "Invalid parameter: {name} must be true or false, not `{value}`"
        ))),
    }
}
