//! The limits SQS sets on a call and the checks it makes, stated once for every front of the
//! model.

use std::time::Duration;

use super::error::{ErrorKind, ModelError};
pub use crate::limits::{
    DEDUPLICATION_WINDOW, MAX_BATCH_ENTRIES, MAX_DELAY_SECS, MAX_MESSAGE_ATTRIBUTES,
    MAX_MESSAGE_BYTES, MAX_QUEUE_NAME_LEN, MAX_VISIBILITY_SECS, MAX_WAIT_SECS,
    valid_attribute_name, valid_queue_name, valid_text,
};

/// The account id in the queue URLs and ARNs the model hands out.
pub const ACCOUNT_ID: &str = "000000000000";
/// The visibility timeout of a new queue, in seconds, as on SQS.
pub const DEFAULT_VISIBILITY_SECS: u32 = 30;

/// Checks the number of entries of a batch call.
///
/// # Errors
///
/// `EmptyBatchRequest` for none, `TooManyEntriesInBatchRequest` for more than
/// [`MAX_BATCH_ENTRIES`].
pub fn check_batch(entries: usize) -> Result<(), ModelError> {
    match entries {
        0 => Err(ModelError::new(
            ErrorKind::EmptyBatchRequest,
            "a batch call needs at least one entry",
        )),
        1..=MAX_BATCH_ENTRIES => Ok(()),
        _ => Err(ModelError::new(
            ErrorKind::TooManyEntriesInBatchRequest,
            format!("{entries} entries, a batch call takes at most {MAX_BATCH_ENTRIES}"),
        )),
    }
}

/// Checks the visibility timeout parameter `name` of a call.
///
/// # Errors
///
/// `InvalidParameterValue` when `seconds` is not `0..=43200`.
pub fn check_visibility(name: &str, seconds: i64) -> Result<Duration, ModelError> {
    in_range(name, seconds, MAX_VISIBILITY_SECS)
}

/// Checks the delay parameter of a send.
///
/// # Errors
///
/// `InvalidParameterValue` when `seconds` is not `0..=900`.
pub fn check_delay(seconds: i64) -> Result<Duration, ModelError> {
    in_range("DelaySeconds", seconds, MAX_DELAY_SECS)
}

/// `seconds` of parameter `name` as a duration, when it is `0..=max`.
fn in_range(name: &str, seconds: i64, max: u32) -> Result<Duration, ModelError> {
    if (0..=i64::from(max)).contains(&seconds) {
        Ok(Duration::from_secs(seconds.unsigned_abs()))
    } else {
        Err(ModelError::new(
            ErrorKind::InvalidParameterValue,
            format!(
                "value {seconds} for parameter {name} is invalid: it must be between 0 and {max}"
            ),
        ))
    }
}

/// Checks the body of a message.
///
/// # Errors
///
/// `MissingParameter` for an empty body (an empty `MessageBody` is no body, as SQS and
/// LocalStack answer); `InvalidMessageContents` for one with characters SQS refuses.
pub fn check_body(body: &str) -> Result<(), ModelError> {
    if body.is_empty() {
        return Err(ModelError::new(
            ErrorKind::MissingParameter,
            "the request must contain the parameter MessageBody",
        ));
    }
    if !valid_text(body) {
        return Err(ModelError::new(
            ErrorKind::InvalidMessageContents,
            "the message body contains characters outside the allowed set",
        ));
    }
    Ok(())
}

/// Checks the size of a message (body and attributes) against the queue's limit.
///
/// # Errors
///
/// `InvalidParameterValue` when it is larger than `limit` bytes.
pub fn check_size(bytes: usize, limit: usize) -> Result<(), ModelError> {
    if bytes > limit {
        return Err(ModelError::new(
            ErrorKind::InvalidParameterValue,
            format!("the message is {bytes} bytes long; the queue's limit is {limit} bytes"),
        ));
    }
    Ok(())
}

/// Checks the size of a batch of messages to send (bodies and attributes, all entries
/// together): SQS takes as much in one batch as in one message.
///
/// # Errors
///
/// `BatchRequestTooLong` when it is larger than [`MAX_MESSAGE_BYTES`].
pub fn check_batch_size(bytes: usize) -> Result<(), ModelError> {
    if bytes > MAX_MESSAGE_BYTES {
        return Err(ModelError::new(
            ErrorKind::BatchRequestTooLong,
            format!("the batch is {bytes} bytes long; at most {MAX_MESSAGE_BYTES} are allowed"),
        ));
    }
    Ok(())
}

/// Checks what a send to a FIFO queue, or to a standard one, must carry.
///
/// # Errors
///
/// `MissingParameter` for a FIFO send without a group id; `InvalidParameterValue` for a FIFO
/// send without a deduplication id to a queue without content-based deduplication, and for a
/// deduplication id sent to a standard queue.
pub fn check_fifo_ids(
    fifo: bool,
    group_id: Option<&str>,
    deduplication_id: Option<&str>,
    content_based: bool,
) -> Result<(), ModelError> {
    if !fifo {
        if deduplication_id.is_some() {
            return Err(ModelError::new(
                ErrorKind::InvalidParameterValue,
                "a MessageDeduplicationId is only for FIFO queues",
            ));
        }
        return Ok(());
    }
    if group_id.is_none() {
        return Err(ModelError::new(
            ErrorKind::MissingParameter,
            "a message sent to a FIFO queue needs a MessageGroupId",
        ));
    }
    if deduplication_id.is_none() && !content_based {
        return Err(ModelError::new(
            ErrorKind::InvalidParameterValue,
            "the queue should either have ContentBasedDeduplication enabled or \
             MessageDeduplicationId provided explicitly",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_or_a_batch_past_a_mebibyte_is_refused_with_the_code_sqs_answers() {
        assert!(check_size(MAX_MESSAGE_BYTES, MAX_MESSAGE_BYTES).is_ok());
        let message = check_size(MAX_MESSAGE_BYTES + 1, MAX_MESSAGE_BYTES).expect_err("too long");
        assert_eq!(message.kind, ErrorKind::InvalidParameterValue);
        assert!(check_batch_size(MAX_MESSAGE_BYTES).is_ok());
        let batch = check_batch_size(MAX_MESSAGE_BYTES + 1).expect_err("too long");
        assert_eq!(batch.kind, ErrorKind::BatchRequestTooLong);
        assert_eq!(
            batch.kind.code(),
            "AWS.SimpleQueueService.BatchRequestTooLong"
        );
    }

    #[test]
    fn a_batch_call_takes_one_to_ten_entries() {
        assert_eq!(
            check_batch(0).expect_err("empty").kind,
            ErrorKind::EmptyBatchRequest
        );
        assert!(check_batch(1).is_ok());
        assert!(check_batch(MAX_BATCH_ENTRIES).is_ok());
        assert_eq!(
            check_batch(MAX_BATCH_ENTRIES + 1)
                .expect_err("too many")
                .kind,
            ErrorKind::TooManyEntriesInBatchRequest
        );
    }
}
