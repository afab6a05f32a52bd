//! The small surface of SQS the engine uses, behind a trait.
//!
//! [`SqsApi`] is what the engine calls; [`AwsSqs`](crate::AwsSqs) implements it over
//! `aws-sdk-sqs`. Another implementation can wrap it, to observe or shape the calls the engine
//! makes ([`SqsDecorator`](crate::SqsDecorator) forwards what such a wrapper leaves alone), or
//! stand in for SQS altogether. None of the types here are `aws-sdk-sqs` types.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::attribute::{AttributeValue, MessageAttribute};

/// A boxed, `Send` future, as returned by [`SqsApi`] methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The SQS calls the engine makes.
///
/// Batch methods answer with one [`EntryResult`] per request entry, in the order of the
/// request, whatever order SQS listed them in. An implementation must not retry on its own:
/// the engine retries transient failures itself, with backoff and jitter, and counts them.
pub trait SqsApi: Send + Sync + 'static {
    /// Resolves a queue name to its URL (`GetQueueUrl`).
    fn queue_url<'a>(&'a self, queue_name: &'a str) -> BoxFuture<'a, Result<String, CallError>>;

    /// Creates a queue, or finds the one of that name (`CreateQueue`); returns its URL.
    fn create_queue<'a>(
        &'a self,
        queue_name: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<String, CallError>>;

    /// Reads the attributes the engine needs (`GetQueueAttributes`).
    fn queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
    ) -> BoxFuture<'a, Result<QueueAttributes, CallError>>;

    /// Writes queue attributes (`SetQueueAttributes`).
    fn set_queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<(), CallError>>;

    /// Long-polls for messages (`ReceiveMessage`), asking for every system and message
    /// attribute.
    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>>;

    /// Deletes up to ten messages (`DeleteMessageBatch`).
    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>>;

    /// Changes the visibility of up to ten messages (`ChangeMessageVisibilityBatch`); each
    /// entry is a receipt handle and the new timeout in seconds.
    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>>;

    /// Sends up to ten messages (`SendMessageBatch`) to one queue.
    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>>;
}

/// An `Arc` of an API is that API, so one API (a `dyn SqsApi` too) can serve several engines
/// and brokers, and a test keep a handle on the one it handed over.
impl<T: SqsApi + ?Sized> SqsApi for Arc<T> {
    fn queue_url<'a>(&'a self, queue_name: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        (**self).queue_url(queue_name)
    }

    fn create_queue<'a>(
        &'a self,
        queue_name: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        (**self).create_queue(queue_name, attributes)
    }

    fn queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
    ) -> BoxFuture<'a, Result<QueueAttributes, CallError>> {
        (**self).queue_attributes(queue_url)
    }

    fn set_queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<(), CallError>> {
        (**self).set_queue_attributes(queue_url, attributes)
    }

    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        (**self).receive(request)
    }

    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        (**self).delete_message_batch(queue_url, receipt_handles)
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        (**self).change_message_visibility_batch(queue_url, entries)
    }

    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        (**self).send_message_batch(queue_url, entries)
    }
}

/// One message of a `SendMessageBatch` call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendEntry {
    /// The body: text SQS accepts (no C0 controls but tab, LF and CR; no U+FFFE or U+FFFF).
    pub body: String,
    /// The message attributes, by name: at most ten, none with an empty value.
    pub attributes: Vec<(String, MessageAttribute)>,
    /// The message group of a FIFO queue; `None` on a standard queue.
    pub group_id: Option<String>,
    /// The deduplication id on a FIFO queue; `None` on a standard queue, or on a FIFO queue
    /// with content-based deduplication.
    pub deduplication_id: Option<String>,
}

impl SendEntry {
    /// What SQS counts against its message size limit (1 MiB): the body, and each message
    /// attribute's name, data type and value.
    pub fn size(&self) -> usize {
        Self::size_of(&self.body, &self.attributes)
    }

    /// [`size`](Self::size) of a body and attributes not yet made an entry.
    pub(crate) fn size_of(body: &str, attributes: &[(String, MessageAttribute)]) -> usize {
        body.len()
            + attributes
                .iter()
                .map(|(name, attribute)| {
                    name.len()
                        + attribute.data_type.len()
                        + match &attribute.value {
                            AttributeValue::String(text) => text.len(),
                            AttributeValue::Binary(bytes) => bytes.len(),
                        }
                })
                .sum::<usize>()
    }
}

/// The arguments of one `ReceiveMessage` call.
#[derive(Debug, Clone)]
pub struct ReceiveRequest<'a> {
    /// The queue's URL.
    pub queue_url: &'a str,
    /// At most this many messages, 1..=10.
    pub max_messages: u8,
    /// The long-poll wait, 0..=20 s.
    pub wait_time: Duration,
    /// The visibility timeout the received messages get, in seconds.
    pub visibility_timeout: u32,
    /// On a FIFO queue, the `ReceiveRequestAttemptId`: a receive retried with the same id
    /// within five minutes gets the messages the first attempt took (if none was changed
    /// since), so an answer lost on the way does not hide them until their visibility lapses.
    /// `None` on a standard queue.
    pub attempt_id: Option<&'a str>,
}

/// One message as a `ReceiveMessage` call returned it.
#[derive(Debug, Clone, Default)]
pub struct ReceivedMessage {
    /// The message id SQS assigned at send.
    pub message_id: String,
    /// The receipt handle of this receive.
    pub receipt_handle: String,
    /// The body.
    pub body: String,
    /// The system attributes (`ApproximateReceiveCount`, `SentTimestamp`, ...), by name.
    pub attributes: HashMap<String, String>,
    /// The message attributes the sender set.
    pub message_attributes: HashMap<String, MessageAttribute>,
}

/// The queue attributes the engine reads when it opens a queue.
#[derive(Debug, Clone, Default)]
pub struct QueueAttributes {
    /// The queue's ARN.
    pub arn: Option<String>,
    /// The queue's default visibility timeout, in seconds.
    pub visibility_timeout: Option<u32>,
    /// Whether it is a FIFO queue.
    pub fifo: bool,
    /// The queue's redrive policy, as the JSON SQS stores.
    pub redrive_policy: Option<String>,
    /// The queue's access policy, as the JSON SQS stores.
    pub policy: Option<String>,
}

/// How one entry of a batch call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryResult {
    /// SQS applied it.
    Ok,
    /// SQS refused it.
    Failed(EntryFailure),
}

/// A batch entry that SQS did not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFailure {
    /// The error code SQS gave (`ReceiptHandleIsInvalid`, `InternalError`, ...).
    pub code: String,
    /// Whether SQS blamed the request rather than itself.
    pub sender_fault: bool,
    /// SQS's description, when it gave one.
    pub message: Option<String>,
}

impl EntryFailure {
    /// Whether trying the same entry again may succeed.
    ///
    /// Codes that name something wrong with the entry itself (an invalid or expired receipt
    /// handle, a message no longer in flight, a value out of range) are permanent whatever
    /// `SenderFault` says; otherwise a server-side fault is transient.
    pub fn is_transient(&self) -> bool {
        const PERMANENT: &[&str] = &[
            "ReceiptHandleIsInvalid",
            "InvalidReceiptHandle",
            "MessageNotInflight",
            "AWS.SimpleQueueService.MessageNotInflight",
            "InvalidParameterValue",
            "InvalidParameterValueException",
            "InvalidBatchEntryId",
            "BatchEntryIdsNotDistinct",
            "InvalidAddress",
        ];
        if PERMANENT.contains(&self.code.as_str()) {
            return false;
        }
        if is_throttling_code(&self.code) {
            return true;
        }
        !self.sender_fault
    }
}

impl fmt::Display for EntryFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.code)?;
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

/// The kind of a failed SQS call, which decides whether it is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallErrorKind {
    /// SQS asked the caller to slow down. Transient.
    Throttled,
    /// SQS failed on its side (HTTP 5xx). Transient.
    Server,
    /// The request did not get an answer: connection refused or reset, timeout. Transient.
    Network,
    /// The queue does not exist.
    QueueNotFound,
    /// The credentials are missing, invalid or not allowed to make the call.
    AccessDenied,
    /// SQS refused the request as malformed or invalid.
    Invalid,
    /// The request could not be built or sent for a reason on this side.
    Other,
}

impl CallErrorKind {
    /// Whether the same call may succeed if made again.
    pub fn is_transient(self) -> bool {
        matches!(self, Self::Throttled | Self::Server | Self::Network)
    }

    /// A short, stable name, as used in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Throttled => "throttled",
            Self::Server => "server",
            Self::Network => "network",
            Self::QueueNotFound => "queue_not_found",
            Self::AccessDenied => "access_denied",
            Self::Invalid => "invalid",
            Self::Other => "other",
        }
    }
}

/// A failed SQS call.
///
/// Made with [`CallError::new`] (and [`with_code`](Self::with_code)). One from the AWS SDK
/// (through [`AwsSqs`](crate::AwsSqs)) keeps the SDK's error as its
/// [`source`](std::error::Error::source) and the [`request_id`](Self::request_id) AWS gave it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CallError {
    /// What kind of failure it was.
    pub kind: CallErrorKind,
    /// The error code SQS gave, when it answered.
    pub code: Option<String>,
    /// A description of the failure.
    pub message: String,
    /// The request id and the underlying error, when there are any (behind one pointer, so
    /// that errors carrying a `CallError` stay small).
    detail: Option<Arc<Detail>>,
}

#[derive(Debug, Default)]
struct Detail {
    request_id: Option<String>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl PartialEq for CallError {
    /// Equal in kind, code, message and request id (the source is not compared).
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.code == other.code
            && self.message == other.message
            && self.request_id() == other.request_id()
    }
}

impl Eq for CallError {}

impl CallError {
    /// A call error of `kind` with a description.
    pub fn new(kind: CallErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            code: None,
            message: message.into(),
            detail: None,
        }
    }

    /// The same error, with the error code SQS answered.
    #[must_use]
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// The same error, with the request id AWS gave the call and the error underneath.
    #[must_use]
    pub fn with_detail(
        mut self,
        request_id: Option<String>,
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        self.detail = Some(Arc::new(Detail { request_id, source }));
        self
    }

    /// The id AWS gave the request (`x-amzn-requestid`), when it answered: what AWS support
    /// asks for.
    pub fn request_id(&self) -> Option<&str> {
        self.detail.as_ref()?.request_id.as_deref()
    }

    /// Whether the same call may succeed if made again.
    pub fn is_transient(&self) -> bool {
        self.kind.is_transient()
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} ({}): {}", code, self.kind.as_str(), self.message),
            None => write!(f, "{}: {}", self.kind.as_str(), self.message),
        }
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let source = self.detail.as_ref()?.source.as_deref()?;
        Some(source as &(dyn std::error::Error + 'static))
    }
}

/// Whether an SQS error code means "slow down".
pub(crate) fn is_throttling_code(code: &str) -> bool {
    matches!(
        code,
        "Throttling"
            | "ThrottlingException"
            | "ThrottledException"
            | "RequestThrottled"
            | "RequestThrottledException"
            | "TooManyRequestsException"
            | "RequestLimitExceeded"
            | "SlowDown"
            | "KmsThrottled"
            | "AWS.SimpleQueueService.RequestThrottled"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: &str, sender_fault: bool) -> EntryFailure {
        EntryFailure {
            code: code.to_owned(),
            sender_fault,
            message: None,
        }
    }

    #[test]
    fn an_invalid_receipt_handle_is_permanent_even_without_sender_fault() {
        assert!(!failure("ReceiptHandleIsInvalid", false).is_transient());
        assert!(!failure("ReceiptHandleIsInvalid", true).is_transient());
    }

    #[test]
    fn a_server_side_entry_failure_is_transient() {
        assert!(failure("InternalError", false).is_transient());
        assert!(failure("ServiceUnavailable", false).is_transient());
    }

    #[test]
    fn a_sender_fault_is_permanent_unless_it_is_throttling() {
        assert!(!failure("SomethingElse", true).is_transient());
        assert!(failure("RequestThrottled", true).is_transient());
    }

    #[test]
    fn only_throttling_server_and_network_calls_are_retried() {
        use CallErrorKind::*;
        for kind in [Throttled, Server, Network] {
            assert!(kind.is_transient(), "{kind:?}");
        }
        for kind in [QueueNotFound, AccessDenied, Invalid, Other] {
            assert!(!kind.is_transient(), "{kind:?}");
        }
    }
}
