//! What the RustStream broker's shutdown waits for: a settlement made before it, queued behind a
//! visibility extension SQS is slow to answer, is sent and answered before the shutdown
//! returns, however long that call takes. A service that exits as soon as the shutdown returns
//! loses nothing.
//!
//! On the in-process SQS (a test double), on tokio's paused clock, behind a decorator that
//! holds every heartbeat extension for half a minute before applying it, as an SQS answering slowly
//! would.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ruststream::{Broker, ConnectedBroker, IncomingMessage, Subscriber};
use sqs_engine::prelude::*;
use sqs_engine::testing::{Change, InProcessSqs};
use sqs_engine::{BoxFuture, CallError, EntryResult, SqsApi, SqsDecorator};
use tokio::sync::Notify;

/// How long SQS takes to answer a heartbeat extension: longer than the broker's grace for the
/// holders of a subscription, shorter than the heartbeat's margin on the queue's visibility
/// timeout of five minutes (one minute), so the message stays hidden throughout.
const SLOW_EXTENSION: Duration = Duration::from_secs(30);

/// The in-process SQS, answering every extension (a visibility change to more than zero
/// seconds that no handler asked for) [`SLOW_EXTENSION`] late, and telling when one is under
/// way.
struct SlowExtensions {
    inner: InProcessSqs,
    extending: Arc<Notify>,
    retry_after_secs: u32,
}

impl SqsDecorator for SlowExtensions {
    type Inner = InProcessSqs;

    fn inner(&self) -> &InProcessSqs {
        &self.inner
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        let extension = entries
            .iter()
            .any(|&(_, seconds)| seconds > 0 && seconds != self.retry_after_secs);
        Box::pin(async move {
            if extension {
                self.extending.notify_one();
                tokio::time::sleep(SLOW_EXTENSION).await;
            }
            SqsApi::change_message_visibility_batch(&self.inner, queue_url, entries).await
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_queued_behind_a_slow_extension_is_answered_before_the_shutdown_returns() {
    let retry_after = Duration::from_secs(600);
    let sqs = InProcessSqs::journaled();
    sqs.send("slow-extensions", "the invoice").expect("sent");
    let extending = Arc::new(Notify::new());
    let broker = SqsBroker::new().api(SlowExtensions {
        inner: sqs.clone(),
        extending: Arc::clone(&extending),
        retry_after_secs: u32::try_from(retry_after.as_secs()).expect("seconds"),
    });
    let connected = broker.connect().await.expect("connect");
    let mut subscriber = connected
        .subscribe_queue(SqsQueue::new("slow-extensions").visibility(Duration::from_secs(300)))
        .await
        .expect("subscribe");
    let delivery = {
        let mut stream = Box::pin(subscriber.stream());
        stream
            .next()
            .await
            .expect("a delivery")
            .expect("it decodes")
    };
    // The handler takes long enough for the heartbeat to extend the message, and settles
    // while that extension waits for SQS's answer: its change of the same message waits
    // behind it.
    tokio::time::timeout(Duration::from_secs(600), extending.notified())
        .await
        .expect("the heartbeat extends the message while it is handled");
    delivery.nack_after(retry_after).await.expect("queued");
    drop(subscriber);
    let started = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(3_600), connected.shutdown())
        .await
        .expect("the shutdown returns")
        .expect("shutdown");
    let applied = sqs.journal().into_iter().any(|applied| {
        matches!(
            applied.change,
            Change::VisibilityChanged { seconds, .. } if u64::from(seconds) == retry_after.as_secs()
        )
    });
    assert!(
        applied,
        "the retry_after was applied before the shutdown returned, {:?} after it began: {:?}",
        started.elapsed(),
        sqs.journal()
    );
}
