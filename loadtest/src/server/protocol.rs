//! The wire shapes of the SQS actions the embedded server answers, in the AWS JSON 1.0
//! protocol that `aws-sdk-sqs` speaks, and the errors it answers with.
//!
//! Inputs are deserialized into typed structs (members the server does not use are
//! ignored); outputs are serialized from typed structs that borrow what they can. Member
//! names follow the SQS JSON model exactly: PascalCase, with `MD5Of…` spelled as SQS spells
//! it.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use md5::{Digest, Md5};
use serde::Serializer;
use serde::{Deserialize, Serialize};
use sqs_engine::limits::valid_attribute_name;
pub(crate) use sqs_engine::testing::model::ErrorKind;
use sqs_engine::testing::model::ModelError;
pub(crate) use sqs_engine::testing::model::rules::ACCOUNT_ID;
use sqs_engine::testing::model::rules::MAX_MESSAGE_ATTRIBUTES;

use super::receipt::ReceiptHandle;

/// The region in every queue ARN.
pub(crate) const REGION: &str = "us-east-1";

/// The content type of every answer.
pub(crate) const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// The prefix of the `X-Amz-Target` header of every SQS action.
pub(crate) const TARGET_PREFIX: &str = "AmazonSQS.";

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// An error answer: its kind and a message for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SqsError {
    /// What went wrong.
    pub(crate) kind: ErrorKind,
    /// Why, in words.
    pub(crate) message: String,
}

impl SqsError {
    /// An error of `kind` saying `message`.
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// The `x-amzn-query-error` header value: `<code>;Sender`. Every error this server
    /// answers with is the caller's fault.
    pub(crate) fn query_error_header(&self) -> String {
        format!("{};Sender", self.kind.code())
    }

    /// The JSON body of the answer.
    pub(crate) fn body(&self) -> Vec<u8> {
        let body = ErrorBody {
            kind: format!("com.amazonaws.sqs#{}", self.kind.shape()),
            message: &self.message,
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }

    /// This error as the failed entry `id` of a batch answer.
    pub(crate) fn into_entry(self, id: String) -> BatchResultErrorEntry {
        BatchResultErrorEntry {
            id,
            sender_fault: true,
            code: self.kind.code(),
            message: self.message,
        }
    }
}

impl From<ModelError> for SqsError {
    fn from(error: ModelError) -> Self {
        Self::new(error.kind, error.message)
    }
}

impl std::fmt::Display for SqsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.code(), self.message)
    }
}

impl std::error::Error for SqsError {}

/// The body of an error answer.
#[derive(Debug, Serialize)]
struct ErrorBody<'a> {
    /// The namespaced shape name, which the SDK reads as the code when there is no
    /// `x-amzn-query-error` header.
    #[serde(rename = "__type")]
    kind: String,
    /// Why, in words.
    message: &'a str,
}

/// The error for a body that does not deserialize into the action's input: a missing
/// member is `MissingParameter`, anything else `SerializationException`.
pub(crate) fn input_error(action: &str, error: &serde_json::Error) -> SqsError {
    let text = error.to_string();
    if text.starts_with("missing field") {
        SqsError::new(ErrorKind::MissingParameter, format!("{action}: {text}"))
    } else {
        SqsError::new(ErrorKind::Serialization, format!("{action}: {text}"))
    }
}

// ---------------------------------------------------------------------------------------
// Shared shapes
// ---------------------------------------------------------------------------------------

/// A message attribute as sent and as received. Binary values stay in their base64 text:
/// the server hands them back as it got them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct MessageAttributeValue {
    /// `String`, `Number` or `Binary`, optionally with a `.custom` suffix.
    pub(crate) data_type: String,
    /// The value of a `String` or `Number` attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) string_value: Option<String>,
    /// The base64 value of a `Binary` attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) binary_value: Option<String>,
    /// Reserved by SQS; kept and handed back when sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) string_list_values: Option<Vec<String>>,
    /// Reserved by SQS; kept and handed back when sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) binary_list_values: Option<Vec<String>>,
}

/// Message attributes by name, in name order (the order their digest is computed in).
pub(crate) type MessageAttributes = BTreeMap<String, MessageAttributeValue>;

/// The bytes message attributes count against a message's size limit (SQS's and SNS's rule
/// alike): each one's name, data type and value.
pub(crate) fn attributes_size(attributes: &MessageAttributes) -> usize {
    attributes
        .iter()
        .map(|(name, value)| {
            name.len()
                + value.data_type.len()
                + value.string_value.as_ref().map_or(0, String::len)
                + value.binary_value.as_ref().map_or(0, String::len)
        })
        .sum()
}

/// A failed entry of a batch answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct BatchResultErrorEntry {
    /// The entry's id, as the request gave it.
    pub(crate) id: String,
    /// Whether the caller is at fault.
    pub(crate) sender_fault: bool,
    /// The error code.
    pub(crate) code: &'static str,
    /// Why, in words.
    pub(crate) message: String,
}

/// A successful entry of a `DeleteMessageBatch` or `ChangeMessageVisibilityBatch` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct BatchResultEntry {
    /// The entry's id, as the request gave it.
    pub(crate) id: String,
}

/// An answer with no members.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Empty {}

// ---------------------------------------------------------------------------------------
// Queue actions
// ---------------------------------------------------------------------------------------

/// `CreateQueue` input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct CreateQueueInput {
    /// The queue's name.
    pub(crate) queue_name: String,
    /// Attributes to create it with.
    #[serde(default)]
    pub(crate) attributes: HashMap<String, String>,
}

/// `GetQueueUrl` input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct GetQueueUrlInput {
    /// The queue's name.
    pub(crate) queue_name: String,
}

/// The answer of `CreateQueue` and `GetQueueUrl`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct QueueUrlOutput {
    /// The queue's URL.
    pub(crate) queue_url: String,
}

/// The input of the actions that only name a queue: `DeleteQueue`, `PurgeQueue`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct QueueUrlInput {
    /// The queue's URL.
    pub(crate) queue_url: String,
}

/// `GetQueueAttributes` input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct GetQueueAttributesInput {
    /// The queue's URL.
    pub(crate) queue_url: String,
    /// The attributes wanted, or `All`. None wanted when absent.
    #[serde(default)]
    pub(crate) attribute_names: Vec<String>,
}

/// `GetQueueAttributes` output.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct GetQueueAttributesOutput {
    /// The attributes, by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) attributes: BTreeMap<&'static str, String>,
}

/// `SetQueueAttributes` input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct SetQueueAttributesInput {
    /// The queue's URL.
    pub(crate) queue_url: String,
    /// The attributes to set.
    #[serde(default)]
    pub(crate) attributes: HashMap<String, String>,
}

/// `ListQueues` input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ListQueuesInput {
    /// Only queues whose name starts with this.
    #[serde(default)]
    pub(crate) queue_name_prefix: Option<String>,
    /// Where the previous page ended.
    #[serde(default)]
    pub(crate) next_token: Option<String>,
    /// The most URLs in one page (1..=1000); paging only happens when it is given.
    #[serde(default)]
    pub(crate) max_results: Option<i64>,
}

/// `ListQueues` output.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ListQueuesOutput {
    /// The queues' URLs, in name order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) queue_urls: Vec<String>,
    /// Where the next page starts, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_token: Option<String>,
}

// ---------------------------------------------------------------------------------------
// Message actions
// ---------------------------------------------------------------------------------------

/// Declares the input of a message to send: a struct of the member `$key` (what the
/// message goes by in its request) and the members of a [`NewMessage`], and its `split`,
/// which parts the two.
macro_rules! message_input {
    (
        $(#[$doc:meta])*
        struct $name:ident {
            $(#[$key_doc:meta])*
            $key:ident,
        }
        $(#[$split_doc:meta])*
        fn split;
    ) => {
        $(#[$doc])*
        #[derive(Debug, Deserialize)]
        #[serde(rename_all = "PascalCase")]
        pub(crate) struct $name {
            $(#[$key_doc])*
            pub(crate) $key: String,
            /// The body.
            pub(crate) message_body: String,
            /// Seconds before it can be received; the queue's `DelaySeconds` when absent.
            #[serde(default)]
            pub(crate) delay_seconds: Option<i64>,
            /// Message attributes.
            #[serde(default)]
            pub(crate) message_attributes: MessageAttributes,
            /// FIFO deduplication id, kept and handed back as a system attribute.
            #[serde(default)]
            pub(crate) message_deduplication_id: Option<String>,
            /// FIFO group id, kept and handed back as a system attribute.
            #[serde(default)]
            pub(crate) message_group_id: Option<String>,
        }

        impl $name {
            $(#[$split_doc])*
            pub(crate) fn split(self) -> (String, NewMessage) {
                let message = NewMessage {
                    body: self.message_body,
                    delay_seconds: self.delay_seconds,
                    attributes: self.message_attributes,
                    deduplication_id: self.message_deduplication_id,
                    group_id: self.message_group_id,
                };
                (self.$key, message)
            }
        }
    };
}

message_input! {
    /// `SendMessage` input.
    struct SendMessageInput {
        /// The queue's URL.
        queue_url,
    }
    /// The queue URL and the message.
    fn split;
}

/// A message to send: what `SendMessage` and a `SendMessageBatch` entry share. (Not
/// flattened into both with serde, which would deserialize through a slower buffered path.)
#[derive(Debug)]
pub(crate) struct NewMessage {
    /// The body.
    pub(crate) body: String,
    /// Seconds before it can be received; the queue's `DelaySeconds` when absent.
    pub(crate) delay_seconds: Option<i64>,
    /// Message attributes.
    pub(crate) attributes: MessageAttributes,
    /// FIFO deduplication id.
    pub(crate) deduplication_id: Option<String>,
    /// FIFO group id.
    pub(crate) group_id: Option<String>,
}

/// `SendMessage` output.
#[derive(Debug, Serialize)]
pub(crate) struct SendMessageOutput {
    /// The new message's id.
    #[serde(rename = "MessageId")]
    pub(crate) message_id: String,
    /// MD5 hex of the body.
    #[serde(rename = "MD5OfMessageBody")]
    pub(crate) md5_of_message_body: String,
    /// MD5 hex of the message attributes, when there are any.
    #[serde(
        rename = "MD5OfMessageAttributes",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) md5_of_message_attributes: Option<String>,
    /// The message's sequence number: FIFO queues only.
    #[serde(rename = "SequenceNumber", skip_serializing_if = "Option::is_none")]
    pub(crate) sequence_number: Option<String>,
}

/// `SendMessageBatch` input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct SendMessageBatchInput {
    /// The queue's URL.
    pub(crate) queue_url: String,
    /// The messages.
    #[serde(default)]
    pub(crate) entries: Vec<SendMessageBatchEntry>,
}

message_input! {
    /// One entry of `SendMessageBatch`.
    struct SendMessageBatchEntry {
        /// The entry's id in the batch.
        id,
    }
    /// The entry id and the message.
    fn split;
}

/// A successful entry of a `SendMessageBatch` answer.
#[derive(Debug, Serialize)]
pub(crate) struct SendMessageBatchResultEntry {
    /// The entry's id in the batch.
    #[serde(rename = "Id")]
    pub(crate) id: String,
    /// What `SendMessage` would have answered.
    #[serde(flatten)]
    pub(crate) sent: SendMessageOutput,
}

/// `SendMessageBatch` output.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct SendMessageBatchOutput {
    /// The entries sent.
    pub(crate) successful: Vec<SendMessageBatchResultEntry>,
    /// The entries refused.
    pub(crate) failed: Vec<BatchResultErrorEntry>,
}

/// `ReceiveMessage` input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ReceiveMessageInput {
    /// The queue's URL.
    pub(crate) queue_url: String,
    /// System attributes wanted (the older member).
    #[serde(default)]
    pub(crate) attribute_names: Vec<String>,
    /// System attributes wanted.
    #[serde(default)]
    pub(crate) message_system_attribute_names: Vec<String>,
    /// Message attributes wanted: names, `prefix.*`, `All` or `.*`.
    #[serde(default)]
    pub(crate) message_attribute_names: Vec<String>,
    /// The most messages to answer (1..=10, default 1).
    #[serde(default)]
    pub(crate) max_number_of_messages: Option<i64>,
    /// Visibility timeout of the received messages; the queue's when absent.
    #[serde(default)]
    pub(crate) visibility_timeout: Option<i64>,
    /// Seconds to wait for a message (0..=20); the queue's `ReceiveMessageWaitTimeSeconds`
    /// when absent.
    #[serde(default)]
    pub(crate) wait_time_seconds: Option<i64>,
}

/// `ReceiveMessage` output.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ReceiveMessageOutput<'a> {
    /// The messages received; absent when none was.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) messages: Vec<ReceivedMessage<'a>>,
}

/// One message of a `ReceiveMessage` answer.
#[derive(Debug, Serialize)]
pub(crate) struct ReceivedMessage<'a> {
    /// The message's id.
    #[serde(rename = "MessageId")]
    pub(crate) message_id: &'a str,
    /// The handle of this receive.
    #[serde(rename = "ReceiptHandle")]
    pub(crate) receipt_handle: ReceiptHandle,
    /// MD5 hex of the body.
    #[serde(rename = "MD5OfBody")]
    pub(crate) md5_of_body: &'a str,
    /// The body.
    #[serde(rename = "Body")]
    pub(crate) body: &'a str,
    /// The system attributes asked for.
    #[serde(
        rename = "Attributes",
        skip_serializing_if = "SystemAttributes::is_empty"
    )]
    pub(crate) attributes: SystemAttributes<'a>,
    /// MD5 hex of the message attributes answered, when there are any.
    #[serde(
        rename = "MD5OfMessageAttributes",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) md5_of_message_attributes: Option<String>,
    /// The message attributes asked for.
    #[serde(
        rename = "MessageAttributes",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub(crate) message_attributes: BTreeMap<&'a str, &'a MessageAttributeValue>,
}

/// The system attributes of a received message; each present only when asked for (and, for
/// the FIFO ones, when the message has it).
#[derive(Debug, Default, Serialize)]
pub(crate) struct SystemAttributes<'a> {
    /// Who sent it: always the server's one account.
    #[serde(rename = "SenderId", skip_serializing_if = "Option::is_none")]
    pub(crate) sender_id: Option<&'static str>,
    /// When it was sent, in epoch milliseconds.
    #[serde(rename = "SentTimestamp", skip_serializing_if = "Option::is_none")]
    pub(crate) sent_timestamp: Option<NumberText>,
    /// How many times it was received, this time included.
    #[serde(
        rename = "ApproximateReceiveCount",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) approximate_receive_count: Option<NumberText>,
    /// When it was first received, in epoch milliseconds.
    #[serde(
        rename = "ApproximateFirstReceiveTimestamp",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) approximate_first_receive_timestamp: Option<NumberText>,
    /// Its FIFO group id.
    #[serde(rename = "MessageGroupId", skip_serializing_if = "Option::is_none")]
    pub(crate) message_group_id: Option<&'a str>,
    /// Its FIFO deduplication id.
    #[serde(
        rename = "MessageDeduplicationId",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) message_deduplication_id: Option<&'a str>,
    /// Its FIFO sequence number.
    #[serde(rename = "SequenceNumber", skip_serializing_if = "Option::is_none")]
    pub(crate) sequence_number: Option<String>,
}

/// A FIFO sequence number as text: 20 digits, so that text order is number order too.
pub(crate) fn sequence_text(sequence_number: u64) -> String {
    format!("{sequence_number:020}")
}

impl SystemAttributes<'_> {
    /// Whether no attribute is present.
    fn is_empty(&self) -> bool {
        self.sender_id.is_none()
            && self.sent_timestamp.is_none()
            && self.approximate_receive_count.is_none()
            && self.approximate_first_receive_timestamp.is_none()
            && self.message_group_id.is_none()
            && self.message_deduplication_id.is_none()
            && self.sequence_number.is_none()
    }
}

/// `DeleteMessage` input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct DeleteMessageInput {
    /// The queue's URL.
    pub(crate) queue_url: String,
    /// The receipt handle of the message's latest receive.
    pub(crate) receipt_handle: String,
}

/// `DeleteMessageBatch` input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct DeleteMessageBatchInput {
    /// The queue's URL.
    pub(crate) queue_url: String,
    /// The messages to delete.
    #[serde(default)]
    pub(crate) entries: Vec<DeleteMessageBatchEntry>,
}

/// One entry of `DeleteMessageBatch`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct DeleteMessageBatchEntry {
    /// The entry's id in the batch.
    pub(crate) id: String,
    /// The receipt handle of the message's latest receive.
    pub(crate) receipt_handle: String,
}

/// `ChangeMessageVisibility` input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ChangeMessageVisibilityInput {
    /// The queue's URL.
    pub(crate) queue_url: String,
    /// The receipt handle of the message's latest receive.
    pub(crate) receipt_handle: String,
    /// Seconds from now until the message is visible again (0..=43200).
    pub(crate) visibility_timeout: i64,
}

/// `ChangeMessageVisibilityBatch` input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ChangeMessageVisibilityBatchInput {
    /// The queue's URL.
    pub(crate) queue_url: String,
    /// The changes.
    #[serde(default)]
    pub(crate) entries: Vec<ChangeMessageVisibilityBatchEntry>,
}

/// One entry of `ChangeMessageVisibilityBatch`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ChangeMessageVisibilityBatchEntry {
    /// The entry's id in the batch.
    pub(crate) id: String,
    /// The receipt handle of the message's latest receive.
    pub(crate) receipt_handle: String,
    /// Seconds from now until the message is visible again (0..=43200); the entry fails
    /// with `MissingParameter` without it.
    #[serde(default)]
    pub(crate) visibility_timeout: Option<i64>,
}

/// The output of `DeleteMessageBatch` and `ChangeMessageVisibilityBatch`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct BatchOutput {
    /// The entries done.
    pub(crate) successful: Vec<BatchResultEntry>,
    /// The entries that failed.
    pub(crate) failed: Vec<BatchResultErrorEntry>,
}

/// A number that SQS gives as a JSON string (counts, timestamps), serialized without
/// allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NumberText(pub(crate) u64);

impl Serialize for NumberText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        let mut rest = self.0;
        loop {
            start -= 1;
            // `rest % 10` is below 10.
            digits[start] = b'0' + u8::try_from(rest % 10).unwrap_or_default();
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        serializer.serialize_str(std::str::from_utf8(&digits[start..]).unwrap_or_default())
    }
}

// ---------------------------------------------------------------------------------------
// Digests
// ---------------------------------------------------------------------------------------

/// MD5 of `bytes`, as 32 lowercase hex digits.
pub(crate) fn md5_hex(bytes: &[u8]) -> String {
    hex(&Md5::digest(bytes))
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// The MD5 digest SQS gives of a set of message attributes (`MD5OfMessageAttributes`):
/// for each attribute in name order, the name, the data type (each as a 4-byte big-endian
/// length and the UTF-8 bytes), a transport byte (1 for a string value, 2 for a binary
/// one) and the value (4-byte length and bytes; a binary value decoded from base64).
///
/// `None` when there are no attributes. An attribute whose binary value is not valid base64
/// is left out; [`validate_attributes`] refuses those before they are stored.
pub(crate) fn md5_of_attributes<'a>(
    attributes: impl IntoIterator<Item = (&'a str, &'a MessageAttributeValue)>,
) -> Option<String> {
    let mut hasher = Md5::new();
    let mut any = false;
    for (name, value) in attributes {
        let (transport, bytes): (u8, Vec<u8>) = match (&value.string_value, &value.binary_value) {
            (Some(text), _) => (1, text.as_bytes().to_vec()),
            (None, Some(encoded)) => match BASE64.decode(encoded) {
                Ok(decoded) => (2, decoded),
                Err(_) => continue,
            },
            (None, None) => continue,
        };
        any = true;
        length_prefixed(&mut hasher, name.as_bytes());
        length_prefixed(&mut hasher, value.data_type.as_bytes());
        hasher.update([transport]);
        length_prefixed(&mut hasher, &bytes);
    }
    any.then(|| hex(&hasher.finalize()))
}

/// Feeds `bytes` to `hasher`, after their length as 4 big-endian bytes.
fn length_prefixed(hasher: &mut Md5, bytes: &[u8]) {
    let length = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    hasher.update(length.to_be_bytes());
    hasher.update(bytes);
}

/// Checks message attributes as SQS does: at most ten; names of 1 to 256 characters from
/// letters, digits, `_`, `-` and `.`, not starting with `AWS.` or `Amazon.`; a data type of
/// `String`, `Number` or `Binary` (with an optional `.label`); a string value for the first
/// two and a base64 binary value for the last.
///
/// Returns the attributes' size in bytes (names, types and values), which counts towards
/// the message size limit.
pub(crate) fn validate_attributes(attributes: &MessageAttributes) -> Result<usize, SqsError> {
    let invalid = |message: String| SqsError::new(ErrorKind::InvalidParameterValue, message);
    if attributes.len() > MAX_MESSAGE_ATTRIBUTES {
        return Err(invalid(format!(
            "{} message attributes; at most {MAX_MESSAGE_ATTRIBUTES} are allowed",
            attributes.len()
        )));
    }
    let mut size = 0;
    for (name, value) in attributes {
        let name_ok = valid_attribute_name(name);
        if !name_ok {
            return Err(invalid(format!(
                "message attribute name `{name}` is invalid"
            )));
        }
        let base = value.data_type.split('.').next().unwrap_or_default();
        match base {
            "String" | "Number" => match &value.string_value {
                Some(text) if !text.is_empty() => size += text.len(),
                _ => {
                    return Err(invalid(format!(
                        "message attribute `{name}` of type {} has no StringValue",
                        value.data_type
                    )));
                }
            },
            "Binary" => match value.binary_value.as_deref().map(|v| BASE64.decode(v)) {
                Some(Ok(bytes)) if !bytes.is_empty() => size += bytes.len(),
                Some(Ok(_)) | None => {
                    return Err(invalid(format!(
                        "message attribute `{name}` of type Binary has no BinaryValue"
                    )));
                }
                Some(Err(error)) => {
                    return Err(invalid(format!(
                        "message attribute `{name}` has a BinaryValue that is not base64: {error}"
                    )));
                }
            },
            _ => {
                return Err(invalid(format!(
                    "message attribute `{name}` has an unknown data type `{}`",
                    value.data_type
                )));
            }
        }
        size += name.len() + value.data_type.len();
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqs_engine::testing::model::rules::valid_text as body_characters_allowed;

    #[test]
    fn md5_of_a_body_is_lowercase_hex() {
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(
            md5_hex(b"The quick brown fox jumps over the lazy dog"),
            "9e107d9d372bb6826bd81d3542a419d6"
        );
    }

    #[test]
    fn the_attribute_digest_encodes_names_types_and_values() {
        let value = MessageAttributeValue {
            data_type: "String".into(),
            string_value: Some("v".into()),
            binary_value: None,
            string_list_values: None,
            binary_list_values: None,
        };
        let mut expected = Vec::new();
        expected.extend_from_slice(&1u32.to_be_bytes());
        expected.extend_from_slice(b"k");
        expected.extend_from_slice(&6u32.to_be_bytes());
        expected.extend_from_slice(b"String");
        expected.push(1);
        expected.extend_from_slice(&1u32.to_be_bytes());
        expected.extend_from_slice(b"v");
        assert_eq!(md5_of_attributes([("k", &value)]), Some(md5_hex(&expected)));
        assert_eq!(md5_of_attributes(std::iter::empty()), None);
    }

    #[test]
    fn errors_carry_the_query_code_and_the_shape() {
        let error = SqsError::new(ErrorKind::QueueDoesNotExist, "no such queue");
        assert_eq!(
            error.query_error_header(),
            "AWS.SimpleQueueService.NonExistentQueue;Sender"
        );
        let body: serde_json::Value =
            serde_json::from_slice(&error.body()).expect("an error body is JSON");
        assert_eq!(body["__type"], "com.amazonaws.sqs#QueueDoesNotExist");
        assert_eq!(body["message"], "no such queue");
    }

    #[test]
    fn numbers_serialize_as_strings() {
        for n in [0, 7, 10, 1_700_000_000_123, u64::MAX] {
            assert_eq!(
                serde_json::to_string(&NumberText(n)).expect("serializes"),
                format!("\"{n}\"")
            );
        }
    }

    #[test]
    fn only_allowed_characters_pass() {
        assert!(body_characters_allowed("hello\tworld\n\u{1F600}"));
        assert!(!body_characters_allowed("nul\u{0}"));
        assert!(!body_characters_allowed("\u{FFFF}"));
    }
}
