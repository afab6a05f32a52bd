//! What the RustStream broker logs about a delivery: the span it carries (the native message
//! span's OpenTelemetry messaging fields) and a settlement SQS refuses after the ack resolved
//! (logged with the message id). On the in-process SQS, on tokio's paused clock; a test binary
//! of its own, so that its subscriber is the process's only one.

use std::time::Duration;

use ruststream::ConnectedBroker;
use sqs_engine::prelude::*;
use sqs_engine::testing::InProcessSqs;
use sqs_engine::{EntryFailure, EntryResult};
use sqs_engine_test_support::log_capture::FmtSpan;
use sqs_engine_test_support::{Answered, LogCapture, TRACEPARENT, traced_entry};
use subscription_first::first_delivery;

#[path = "subscription/first.rs"]
mod subscription_first;
#[path = "subscription/next.rs"]
mod subscription_next;

/// The process's subscriber, at INFO and above, announcing each span as it opens.
fn captured() -> &'static LogCapture {
    LogCapture::install(tracing::Level::INFO, FmtSpan::NEW)
}

fn text() -> String {
    captured().text()
}

/// The in-process SQS, refusing every delete as SQS refuses a stale receipt handle.
fn refusing_deletes(sqs: InProcessSqs) -> Answered<InProcessSqs> {
    Answered::new(sqs).deletes(|_, _, receipt_handles| {
        Box::pin(async move {
            Ok(receipt_handles
                .iter()
                .map(|_| {
                    EntryResult::Failed(EntryFailure {
                        code: "ReceiptHandleIsInvalid".into(),
                        sender_fault: true,
                        message: None,
                    })
                })
                .collect())
        })
    })
}

#[tokio::test(start_paused = true)]
async fn a_delivery_carries_the_native_message_span() {
    captured();
    let sqs = InProcessSqs::new();
    let id = sqs
        .send_entry("spans", &traced_entry("traced"))
        .expect("sent");
    let (connected, subscriber, delivery) =
        first_delivery(SqsBroker::new().api(sqs), SqsQueue::new("spans")).await;
    delivery.ack().await.expect("acked");
    drop(subscriber);
    connected.shutdown().await.expect("shutdown");
    let text = text();
    let line = text
        .lines()
        .find(|line| line.contains("message{") && line.contains("name=\"spans\""))
        .unwrap_or_else(|| panic!("the delivery's span opened: {text}"));
    for field in [
        "messaging.system=\"aws_sqs\"",
        "messaging.operation.type=\"process\"",
        &format!("messaging.message.id=\"{id}\""),
        "messaging.sqs.receive_count=1",
        &format!("traceparent=\"{TRACEPARENT}\""),
    ] {
        assert!(line.contains(field), "{field} on the message span: {line}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_delete_sqs_refuses_after_the_ack_resolved_is_logged_with_the_message_id() {
    captured();
    let sqs = InProcessSqs::new();
    let id = sqs.send("refused", "refused").expect("sent");
    let (connected, subscriber, delivery) = first_delivery(
        SqsBroker::new().api(refusing_deletes(sqs)),
        SqsQueue::new("refused"),
    )
    .await;
    delivery
        .ack()
        .await
        .expect("the ack resolves once queued; SQS's refusal is logged");
    drop(subscriber);
    connected.shutdown().await.expect("shutdown");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let text = text();
    assert!(
        text.lines().any(|line| line.contains("settlement failed")
            && line.contains(&id)
            && line.contains("ReceiptHandleIsInvalid")),
        "the refusal is logged with the message id {id}: {text}"
    );
}
