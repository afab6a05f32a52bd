//! How the double answers a call it refuses: the engine's [`CallError`], or a failed entry of
//! a batch.

use super::model::{ErrorKind, ModelError};
use crate::api::{CallError, CallErrorKind, EntryFailure, EntryResult};

pub(super) fn invalid(code: &str, message: impl Into<String>) -> CallError {
    CallError::new(CallErrorKind::Invalid, message).with_code(code)
}

pub(super) fn not_found(url: &str) -> CallError {
    CallError::new(
        CallErrorKind::QueueNotFound,
        format!("the queue {url} does not exist"),
    )
    .with_code("AWS.SimpleQueueService.NonExistentQueue")
}

pub(super) fn entry_failure(code: &str, message: impl Into<String>) -> EntryResult {
    EntryResult::Failed(EntryFailure {
        code: code.to_owned(),
        sender_fault: true,
        message: Some(message.into()),
    })
}

impl From<ModelError> for CallError {
    fn from(error: ModelError) -> Self {
        let kind = match error.kind {
            ErrorKind::QueueDoesNotExist => CallErrorKind::QueueNotFound,
            _ => CallErrorKind::Invalid,
        };
        Self::new(kind, error.message).with_code(error.kind.code())
    }
}
