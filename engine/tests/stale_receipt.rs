//! A receipt handle that is not the latest of its message (the message was received again
//! since): SQS documents that `DeleteMessage` with it "succeeds, but the message might not be
//! deleted". Both models of SQS in this repository (the in-process SQS of feature `testing`
//! and the load test's embedded server) answer that way and delete nothing, the case the
//! engine must never count on; they refuse a visibility change with a stale handle. This pins
//! the answers on LocalStack and on the in-process SQS. LocalStack differs behind the same
//! answer: it deletes the message, and it applies a visibility change with a stale handle.

use sqs_engine_test_support as support;

use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{AwsSqs, EntryResult, ReceiveRequest, ReceivedMessage, SendEntry, SqsApi};

/// What a stale handle got: the delete's answer, the visibility change's answer, and
/// whether the message was still on the queue after the stale delete.
struct Answers {
    delete: EntryResult,
    change_visibility: EntryResult,
    still_there: bool,
}

async fn receive_one(api: &dyn SqsApi, url: &str, visibility: u32) -> Option<ReceivedMessage> {
    let request = ReceiveRequest {
        queue_url: url,
        max_messages: 1,
        wait_time: Duration::from_secs(1),
        visibility_timeout: visibility,
        attempt_id: None,
        system_attributes: sqs_engine::SystemAttributes::All.names(),
    };
    api.receive(&request)
        .await
        .expect("receive")
        .into_iter()
        .next()
}

/// Receives a message twice (the first receive's visibility lapses at once), then uses the
/// first, stale, handle.
async fn stale_handle_answers(api: &dyn SqsApi, queue: &str) -> Answers {
    let url = api
        .create_queue(queue, &[])
        .await
        .expect("create the queue");
    let sent = api
        .send_message_batch(
            &url,
            &[SendEntry {
                body: "stale".to_owned(),
                ..SendEntry::default()
            }],
        )
        .await
        .expect("send");
    assert_eq!(sent, vec![EntryResult::Ok]);
    let first = receive_one(api, &url, 0).await.expect("first receive");
    let second = receive_one(api, &url, 1).await.expect("second receive");
    assert_ne!(first.receipt_handle, second.receipt_handle);
    let stale = first.receipt_handle.as_str();

    let change_visibility = api
        .change_message_visibility_batch(&url, &[(stale, 0)])
        .await
        .expect("ChangeMessageVisibilityBatch")
        .remove(0);
    let delete = api
        .delete_message_batch(&url, &[stale])
        .await
        .expect("DeleteMessageBatch")
        .remove(0);
    // The second receive's visibility (1 s) lapses: the message comes back unless the stale
    // delete removed it.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let still_there = receive_one(api, &url, 30).await.is_some();
    Answers {
        delete,
        change_visibility,
        still_there,
    }
}

#[tokio::test]
async fn localstack_answers_a_stale_delete_with_success_and_deletes_the_message() {
    let api = AwsSqs::from_sdk_config(&support::sdk_config().await);
    let answers = stale_handle_answers(&api, &support::unique("stale-receipt")).await;
    assert_eq!(answers.delete, EntryResult::Ok, "the answer SQS documents");
    assert_eq!(
        answers.change_visibility,
        EntryResult::Ok,
        "LocalStack applies a visibility change with a stale handle"
    );
    assert!(
        !answers.still_there,
        "LocalStack deletes the message behind a stale handle (SQS: it might not)"
    );
}

#[tokio::test(start_paused = true)]
async fn the_in_process_sqs_answers_a_stale_delete_with_success_deletes_nothing_and_refuses_a_visibility_change()
 {
    let api = InProcessSqs::new();
    let answers = stale_handle_answers(&api, "stale-receipt").await;
    assert_eq!(answers.delete, EntryResult::Ok, "the answer SQS documents");
    assert!(
        matches!(answers.change_visibility, EntryResult::Failed(_)),
        "{:?}",
        answers.change_visibility
    );
    assert!(
        answers.still_there,
        "a stale handle deletes nothing: the engine must never count on it"
    );
}
