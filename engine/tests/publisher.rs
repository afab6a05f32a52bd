//! The native publisher (`Publisher`) against LocalStack: shared `SendMessageBatch` calls with
//! an answer per message, calls of up to 1 MiB, a FIFO group's order, and what closing does.

use std::sync::PoisonError;

use futures::future::join_all;
use sqs_engine::{AttributeValue, MessageAttribute, OutgoingMessage, PublishError, Publisher};
use sqs_engine_test_support::{self as support, Recording};

/// A publisher on LocalStack that records its batch calls.
async fn recorded() -> (Publisher, Recording) {
    let recording = Recording::new(None).await;
    let publisher = Publisher::builder()
        .api(recording.clone())
        .build()
        .expect("publisher");
    (publisher, recording)
}

/// The entries of each `SendMessageBatch` the publisher made.
fn send_calls(recording: &Recording) -> Vec<usize> {
    recording
        .record
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .batches
        .iter()
        .filter(|call| call.action == "SendMessageBatch")
        .map(|call| call.receipt_handles.len())
        .collect()
}

/// The bodies on `url`, in the order SQS hands them out, until it hands out none.
async fn drain(client: &aws_sdk_sqs::Client, url: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    loop {
        let messages = support::receive_raw(client, url, 1, 60).await;
        if messages.is_empty() {
            return bodies;
        }
        for message in messages {
            bodies.push(message.body.unwrap_or_default());
            client
                .delete_message()
                .queue_url(url)
                .receipt_handle(message.receipt_handle.unwrap_or_default())
                .send()
                .await
                .expect("DeleteMessage");
        }
    }
}

#[tokio::test]
async fn sends_share_batch_calls_and_each_is_answered_on_its_own() {
    let client = support::client().await;
    let queue = support::unique("publish");
    let url = support::create_queue(&client, &queue, 30).await;
    let (publisher, recording) = recorded().await;
    // Message 7 has an attribute of a data type SQS refuses (no check before sending knows
    // it): its send fails, the others of its call do not.
    let bodies: Vec<String> = (0..25).map(|n| format!("m{n}")).collect();
    let results = join_all(bodies.iter().enumerate().map(|(n, body)| {
        let message = OutgoingMessage::new(body.as_str());
        let message = if n == 7 {
            message.attribute(
                "kind",
                MessageAttribute {
                    data_type: "Weird".into(),
                    value: AttributeValue::String("x".into()),
                },
            )
        } else {
            message
        };
        publisher.send(&queue, message)
    }))
    .await;
    for (n, result) in results.iter().enumerate() {
        if n == 7 {
            match result {
                Err(PublishError::Failed { destination, .. }) => assert_eq!(destination, &queue),
                other => panic!("the refused body: expected Failed, got {other:?}"),
            }
        } else {
            assert!(result.is_ok(), "m{n}: {result:?}");
        }
    }
    let calls = send_calls(&recording);
    assert_eq!(calls.iter().sum::<usize>(), 25, "{calls:?}");
    assert!(
        calls.len() <= 5,
        "25 sends in {} calls: {calls:?}",
        calls.len()
    );
    let mut received = drain(&client, &url).await;
    received.sort();
    let mut expected: Vec<String> = bodies.into_iter().filter(|b| b != "m7").collect();
    expected.sort();
    assert_eq!(received, expected, "every accepted message arrived once");
    publisher.close().await;
    support::delete_queue(&client, &url).await;
}

#[tokio::test]
async fn large_messages_share_calls_of_up_to_a_mebibyte() {
    let client = support::client().await;
    let queue = support::unique("publish-large");
    let url = support::create_queue(&client, &queue, 30).await;
    let (publisher, recording) = recorded().await;
    // Ten of 100 KiB: 1,000 KiB in all, within one call's 1 MiB (two calls at the most when
    // the first goes out alone); calls of 256 KiB would take five.
    let bodies: Vec<String> = (0..10)
        .map(|n| format!("{n}{}", "x".repeat(100 * 1024 - 1)))
        .collect();
    let results = join_all(
        bodies
            .iter()
            .map(|body| publisher.send(&queue, OutgoingMessage::new(body.as_str()))),
    )
    .await;
    for result in results {
        result.expect("sent");
    }
    let calls = send_calls(&recording);
    assert_eq!(calls.iter().sum::<usize>(), 10, "{calls:?}");
    assert!(calls.len() <= 2, "ten of 100 KiB in {calls:?}");
    assert_eq!(drain(&client, &url).await.len(), 10);
    publisher.close().await;
    support::delete_queue(&client, &url).await;
}

#[tokio::test]
async fn a_fifo_group_arrives_in_the_order_it_was_sent() {
    let client = support::client().await;
    let queue = format!("{}.fifo", support::unique("publish"));
    let url = support::create_fifo_queue(&client, &queue, 30).await;
    let (publisher, recording) = recorded().await;
    let bodies: Vec<String> = (0..30).map(|n| format!("m{n:02}")).collect();
    let results = join_all(bodies.iter().map(|body| {
        publisher.send(
            &url,
            OutgoingMessage::new(body.as_str()).group_id("account-7"),
        )
    }))
    .await;
    for result in results {
        result.expect("sent");
    }
    assert!(
        send_calls(&recording).len() <= 6,
        "{:?}",
        send_calls(&recording)
    );
    assert_eq!(drain(&client, &url).await, bodies);
    let refused = publisher
        .send(&url, OutgoingMessage::new("no group"))
        .await
        .expect_err("a FIFO message without a group");
    assert!(
        matches!(refused, PublishError::Refused { .. }),
        "{refused:?}"
    );
    publisher.close().await;
    support::delete_queue(&client, &url).await;
}

#[tokio::test]
async fn closing_sends_what_waits_and_refuses_what_comes_after() {
    let client = support::client().await;
    let queue = support::unique("publish-close");
    let url = support::create_queue(&client, &queue, 30).await;
    let (publisher, _recording) = recorded().await;
    let mut sends: Vec<_> = (0..5)
        .map(|n| Box::pin(publisher.send(&queue, OutgoingMessage::new(format!("m{n}")))))
        .collect();
    // Polled once: each is queued, waiting for its call.
    for send in &mut sends {
        assert!(futures::poll!(send).is_pending());
    }
    publisher.close().await;
    // Closing waited for their answers.
    for send in sends {
        let answered = futures::poll!(send);
        assert!(
            matches!(answered, std::task::Poll::Ready(Ok(()))),
            "{answered:?}"
        );
    }
    let late = publisher
        .send(&queue, OutgoingMessage::new("late"))
        .await
        .expect_err("closed");
    assert!(matches!(late, PublishError::Closed), "{late:?}");
    assert_eq!(drain(&client, &url).await.len(), 5);
    support::delete_queue(&client, &url).await;
}
