//! A failed call keeps what AWS said: the SDK's error as its source and the request id, on
//! LocalStack.

use sqs_engine_test_support as support;

use std::error::Error as _;

use sqs_engine::{AwsSqs, CallErrorKind, SqsApi};

#[tokio::test]
async fn a_failed_call_keeps_the_sdk_error_as_its_source_and_the_request_id() {
    let api = AwsSqs::from_sdk_config(&support::sdk_config().await);
    let error = api
        .queue_url(&support::unique("no-such-queue"))
        .await
        .expect_err("the queue does not exist");
    assert_eq!(error.kind, CallErrorKind::QueueNotFound);
    assert!(
        error.request_id().is_some_and(|id| !id.is_empty()),
        "the request id AWS gave: {error:?}"
    );
    let source = error.source().expect("the SDK's error underneath");
    assert!(
        !source.to_string().is_empty(),
        "the source describes itself"
    );
}
