//! What the model answers when it refuses a call: the kind of error SQS gives, and why.

use std::fmt;

/// The kinds of error SQS answers with, as the model gives them.
///
/// Each has the shape name SQS gives it in its JSON protocol and the code it had in the older
/// query protocol (which SQS still sends in the `x-amzn-query-error` header, and which batch
/// entries carry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The queue named by a URL or name does not exist.
    QueueDoesNotExist,
    /// `CreateQueue` for an existing queue with different attributes.
    QueueNameExists,
    /// A receipt handle that is malformed, or not the latest one of a message that exists.
    ReceiptHandleIsInvalid,
    /// `ChangeMessageVisibility` for a message that is not in flight.
    MessageNotInflight,
    /// An attribute name that is no queue attribute, or one that cannot be set.
    InvalidAttributeName,
    /// An attribute value out of range or malformed.
    InvalidAttributeValue,
    /// A message body with characters SQS does not allow, or an empty one.
    InvalidMessageContents,
    /// A parameter value out of range or malformed.
    InvalidParameterValue,
    /// A required parameter is missing.
    MissingParameter,
    /// A batch with no entries.
    EmptyBatchRequest,
    /// A batch with more than ten entries.
    TooManyEntriesInBatchRequest,
    /// A batch whose entries do not have distinct ids.
    BatchEntryIdsNotDistinct,
    /// A batch entry id that is not 1 to 80 letters, digits, `-` or `_`.
    InvalidBatchEntryId,
    /// A `SendMessageBatch` whose bodies and attributes add up to more than the limit.
    BatchRequestTooLong,
    /// An SQS action the model does not implement.
    UnsupportedOperation,
    /// A request that names no SQS action at all.
    UnknownOperation,
    /// A request body that is not the JSON the action expects.
    Serialization,
}

impl ErrorKind {
    /// The shape name, as in the JSON protocol's `__type` (after the `com.amazonaws.sqs#`
    /// namespace).
    pub fn shape(self) -> &'static str {
        match self {
            Self::QueueDoesNotExist => "QueueDoesNotExist",
            Self::QueueNameExists => "QueueNameExists",
            Self::ReceiptHandleIsInvalid => "ReceiptHandleIsInvalid",
            Self::MessageNotInflight => "MessageNotInflight",
            Self::InvalidAttributeName => "InvalidAttributeName",
            Self::InvalidAttributeValue => "InvalidAttributeValue",
            Self::InvalidMessageContents => "InvalidMessageContents",
            Self::InvalidParameterValue => "InvalidParameterValue",
            Self::MissingParameter => "MissingParameter",
            Self::EmptyBatchRequest => "EmptyBatchRequest",
            Self::TooManyEntriesInBatchRequest => "TooManyEntriesInBatchRequest",
            Self::BatchEntryIdsNotDistinct => "BatchEntryIdsNotDistinct",
            Self::InvalidBatchEntryId => "InvalidBatchEntryId",
            Self::BatchRequestTooLong => "BatchRequestTooLong",
            Self::UnsupportedOperation => "UnsupportedOperation",
            Self::UnknownOperation => "UnknownOperationException",
            Self::Serialization => "SerializationException",
        }
    }

    /// The query-protocol code, as in the `x-amzn-query-error` header and in the `Code` of a
    /// failed batch entry.
    pub fn code(self) -> &'static str {
        match self {
            Self::QueueDoesNotExist => "AWS.SimpleQueueService.NonExistentQueue",
            Self::QueueNameExists => "QueueAlreadyExists",
            Self::MessageNotInflight => "AWS.SimpleQueueService.MessageNotInflight",
            Self::EmptyBatchRequest => "AWS.SimpleQueueService.EmptyBatchRequest",
            Self::TooManyEntriesInBatchRequest => {
                "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
            }
            Self::BatchEntryIdsNotDistinct => "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            Self::InvalidBatchEntryId => "AWS.SimpleQueueService.InvalidBatchEntryId",
            Self::BatchRequestTooLong => "AWS.SimpleQueueService.BatchRequestTooLong",
            Self::UnsupportedOperation => "AWS.SimpleQueueService.UnsupportedOperation",
            other => other.shape(),
        }
    }
}

/// A call the model refuses: the kind of error SQS answers with, and why in words.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Why, in words.
    pub message: String,
}

impl ModelError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.code(), self.message)
    }
}

impl std::error::Error for ModelError {}
