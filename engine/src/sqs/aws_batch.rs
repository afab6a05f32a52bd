//! The batch calls of either SDK: `SendMessageBatch`, `DeleteMessageBatch` and
//! `ChangeMessageVisibilityBatch` of `aws-sdk-sqs`, `PublishBatch` of `aws-sdk-sns`. Their
//! entries are numbered by position, a [`SendEntry`](crate::api::SendEntry) becomes an entry
//! the same way in both, and their answers come back as one result per entry.
//!
//! The two SDKs generate the same builders and error entries from two service models, with no
//! trait in common: what is written once for both is a macro, `send_entries!` and
//! `entry_failures!`.

use crate::api::{BoxFuture, CallError, CallErrorKind, EntryFailure, EntryResult};

/// Entry ids are positions in the batch, never message ids: the same message received twice
/// can be settled twice in one batch without `BatchEntryIdsNotDistinct`.
pub(crate) const ENTRY_IDS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

/// `entries` (`&[SendEntry]`, ten at most) as the request entries of one SDK's batch call,
/// each with its position as its id: `send_entries!(aws_sdk_sqs, SendMessageBatchRequestEntry,
/// message_body, entries)` or `send_entries!(aws_sdk_sns, PublishBatchRequestEntry, message,
/// entries)`, the SDK, its entry type and the builder method that sets the body. Evaluates to
/// `Result<Vec<_>, BuildError>`: an entry or attribute the SDK refuses to build.
macro_rules! send_entries {
    ($sdk:ident, $entry:ident, $body:ident, $entries:expr) => {
        $entries
            .iter()
            .enumerate()
            .map(|(position, entry)| {
                let mut request = $sdk::types::$entry::builder()
                    .id($crate::sqs::aws_batch::ENTRY_IDS[position])
                    .$body(&entry.body)
                    .set_message_group_id(entry.group_id.clone())
                    .set_message_deduplication_id(entry.deduplication_id.clone());
                for (name, attribute) in &entry.attributes {
                    let value = $sdk::types::MessageAttributeValue::builder()
                        .data_type(&attribute.data_type);
                    let value = match &attribute.value {
                        $crate::attribute::AttributeValue::String(text) => value.string_value(text),
                        $crate::attribute::AttributeValue::Binary(bytes) => {
                            value.binary_value($sdk::primitives::Blob::new(bytes.clone()))
                        }
                    };
                    request = request.message_attributes(name, value.build()?);
                }
                request.build()
            })
            .collect::<Result<Vec<_>, $sdk::error::BuildError>>()
    };
}
pub(crate) use send_entries;

/// One SDK's list of `BatchResultErrorEntry` (an iterable) as entry ids and
/// `EntryFailure`s, for `align`.
macro_rules! entry_failures {
    ($failed:expr) => {
        $failed.into_iter().map(|failure| {
            (
                failure.id,
                $crate::api::EntryFailure {
                    code: failure.code,
                    sender_fault: failure.sender_fault,
                    message: failure.message,
                },
            )
        })
    };
}
pub(crate) use entry_failures;

/// The answer to a batch call with an entry the SDK refused to build: an invalid call, made
/// without calling.
pub(crate) fn invalid_entry<T: Send + 'static>(
    error: impl std::fmt::Display,
) -> BoxFuture<'static, Result<T, CallError>> {
    let error = CallError::new(CallErrorKind::Invalid, error.to_string());
    Box::pin(async move { Err(error) })
}

/// One result per request entry, in request order, from SQS's `Successful` and `Failed` lists.
/// An entry SQS named in neither list is reported as a transient failure, to be sent again.
pub(crate) fn align<'a>(
    entries: usize,
    successful: impl Iterator<Item = &'a str>,
    failed: impl IntoIterator<Item = (String, EntryFailure)>,
) -> Vec<EntryResult> {
    let mut results: Vec<Option<EntryResult>> = vec![None; entries];
    for id in successful {
        if let Some(slot) = id.parse::<usize>().ok().and_then(|i| results.get_mut(i)) {
            *slot = Some(EntryResult::Ok);
        }
    }
    for (id, failure) in failed {
        if let Some(slot) = id.parse::<usize>().ok().and_then(|i| results.get_mut(i)) {
            *slot = Some(EntryResult::Failed(failure));
        }
    }
    results
        .into_iter()
        .map(|result| result.unwrap_or_else(|| EntryResult::Failed(EntryFailure::missing())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_results_are_aligned_to_request_positions() {
        let failed = vec![
            aws_sdk_sqs::types::BatchResultErrorEntry::builder()
                .id("1")
                .code("ReceiptHandleIsInvalid")
                .sender_fault(true)
                .build()
                .expect("valid entry"),
        ];
        let results = align(3, ["2", "0"].into_iter(), entry_failures!(failed));
        assert_eq!(results[0], EntryResult::Ok);
        assert!(
            matches!(&results[1], EntryResult::Failed(f) if f.code == "ReceiptHandleIsInvalid")
        );
        assert_eq!(results[2], EntryResult::Ok);
    }

    #[test]
    fn an_entry_sqs_did_not_mention_is_sent_again() {
        let results = align(2, ["0"].into_iter(), Vec::new());
        assert!(matches!(&results[1], EntryResult::Failed(f) if f.is_transient()));
    }
}
