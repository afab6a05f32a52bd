//! The limits SQS sets and what it answers when a call breaks one.

use std::time::Duration;

use crate::api::{CallError, CallErrorKind, EntryFailure, EntryResult};

/// The account id in the queue URLs and ARNs this double hands out.
pub(super) const ACCOUNT: &str = "000000000000";
/// The visibility timeout of a new queue, as on SQS.
pub(super) const DEFAULT_VISIBILITY: u32 = 30;
/// The largest message, body and attributes together, and the largest batch.
pub(super) const MAX_MESSAGE_BYTES: usize = 1_048_576;
/// How long a FIFO queue remembers a deduplication id.
pub(super) const DEDUPLICATION_WINDOW: Duration = Duration::from_secs(300);
/// The most entries in one batch call, and the most messages one receive hands out.
pub(super) const MAX_BATCH: usize = 10;
/// The most message attributes on one message.
pub(super) const MAX_ATTRIBUTES: usize = 10;

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

pub(super) fn valid_queue_name(name: &str) -> bool {
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    !stem.is_empty()
        && name.len() <= 80
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

/// Whether SQS takes `text` in a body or a string attribute.
pub(super) fn is_sqs_text(text: &str) -> bool {
    text.chars().all(|c| {
        matches!(c, '\t' | '\n' | '\r') || (c >= '\u{20}' && c != '\u{FFFE}' && c != '\u{FFFF}')
    })
}

pub(super) fn check_batch(entries: usize) -> Result<(), CallError> {
    match entries {
        0 => Err(invalid(
            "AWS.SimpleQueueService.EmptyBatchRequest",
            "a batch call needs at least one entry",
        )),
        1..=MAX_BATCH => Ok(()),
        _ => Err(invalid(
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            format!("{entries} entries, a batch call takes at most {MAX_BATCH}"),
        )),
    }
}
