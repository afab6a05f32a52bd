//! How many bytes the native publisher puts in one `SendMessageBatch`: up to SQS's 1 MiB, and
//! at most 256 KiB from the first refusal on, for an SQS that holds to its old limit.
//!
//! On the in-process SQS (a test double), behind a decorator that refuses a batch call over
//! 256 KiB as `BatchRequestTooLong` as such an SQS does; LocalStack takes 1 MiB, and
//! `tests/publisher.rs` proves the calls there.

use std::sync::{Arc, Mutex, PoisonError};

use futures::future::join_all;
use sqs_engine::testing::InProcessSqs;
use sqs_engine::{
    BoxFuture, CallError, CallErrorKind, EntryResult, OutgoingMessage, Publisher, SendEntry,
    SqsApi, SqsDecorator,
};

/// An SQS whose batch calls take at most `limit` bytes of messages, recording the bytes of
/// each call it was asked to make.
struct Limited {
    inner: InProcessSqs,
    limit: usize,
    calls: Arc<Mutex<Vec<usize>>>,
}

impl SqsDecorator for Limited {
    type Inner = InProcessSqs;

    fn inner(&self) -> &InProcessSqs {
        &self.inner
    }

    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        let bytes: usize = entries.iter().map(SendEntry::size).sum();
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(bytes);
        if bytes > self.limit {
            return Box::pin(std::future::ready(Err(CallError::new(
                CallErrorKind::Invalid,
                format!("Batch requests cannot be longer than {} bytes", self.limit),
            )
            .with_code("AWS.SimpleQueueService.BatchRequestTooLong"))));
        }
        SqsApi::send_message_batch(&self.inner, queue_url, entries)
    }
}

/// Sends `count` messages of 100 KiB at once to `queue` (one group on a FIFO queue) through
/// an SQS taking `limit` bytes a call, and returns the bytes of each call asked for.
async fn of_100_kib(count: usize, queue: &str, limit: usize) -> (InProcessSqs, Vec<usize>) {
    let sqs = InProcessSqs::new();
    sqs.send(queue, "opens the queue").expect("sent");
    let calls = Arc::new(Mutex::new(Vec::new()));
    let publisher = Publisher::builder()
        .api(Limited {
            inner: sqs.clone(),
            limit,
            calls: Arc::clone(&calls),
        })
        .build()
        .expect("publisher");
    let bodies: Vec<String> = (0..count)
        .map(|n| format!("{n:02}{}", "x".repeat(100 * 1024 - 2)))
        .collect();
    let fifo = queue.ends_with(".fifo");
    let results = join_all(bodies.iter().map(|body| {
        let message = OutgoingMessage::new(body.as_str());
        let message = if fifo { message.group_id("g") } else { message };
        publisher.send(queue, message)
    }))
    .await;
    for result in results {
        result.expect("sent");
    }
    publisher.close().await;
    let calls = calls.lock().unwrap_or_else(PoisonError::into_inner).clone();
    (sqs, calls)
}

#[tokio::test(start_paused = true)]
async fn large_messages_share_calls_of_up_to_a_mebibyte() {
    let (sqs, calls) = of_100_kib(10, "big", 1_048_576).await;
    // The first may go out alone, while no call is in flight; the rest share one.
    assert!(
        calls.len() <= 2,
        "ten of 100 KiB in calls of {calls:?} bytes"
    );
    assert_eq!(sqs.bodies("big").len(), 11);
}

#[tokio::test(start_paused = true)]
async fn an_sqs_holding_to_256_kib_gets_smaller_calls_and_every_message() {
    let (sqs, calls) = of_100_kib(10, "big", 256 * 1024).await;
    assert_eq!(sqs.bodies("big").len(), 11, "every message sent once");
    let refused = calls.iter().filter(|bytes| **bytes > 256 * 1024).count();
    assert_eq!(
        refused, 1,
        "one call refused, then calls within 256 KiB: {calls:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn on_a_fifo_queue_the_smaller_calls_keep_the_order() {
    // The first goes alone, the next ten in a call of 1,000 KiB that is refused while five
    // more wait behind it: the ten go again before those five.
    let (sqs, calls) = of_100_kib(16, "big.fifo", 256 * 1024).await;
    assert!(
        calls.iter().any(|bytes| *bytes > 256 * 1024),
        "a call was refused: {calls:?}"
    );
    let sent: Vec<usize> = sqs
        .bodies("big.fifo")
        .iter()
        .skip(1)
        .map(|body| body[..2].parse().expect("numbered"))
        .collect();
    assert_eq!(sent, (0..16).collect::<Vec<_>>());
}
