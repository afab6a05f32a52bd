//! What the RustStream broker's shutdown waits for: a settlement made before it (a requeue, a
//! retry_after), queued behind a heartbeat extension SQS is slow to answer, is sent and
//! answered before the shutdown returns, however long that call takes. A service that exits as
//! soon as the shutdown returns loses nothing.
//!
//! Live against LocalStack, through the fault-injecting proxy, which leaves the extension
//! unanswered until the engine's call timeout; and on the in-process SQS (a test double), on
//! tokio's paused clock, behind a decorator that answers every extension half a minute late.

use sqs_engine_test_support as support;

use std::sync::Arc;
use std::time::Duration;

use ruststream::{ConnectedBroker, IncomingMessage};
use sqs_engine::prelude::*;
use sqs_engine::testing::{Change, InProcessSqs};
use sqs_engine::{AwsSqs, SqsApi};
use subscription_first::first_delivery;
use support::Answered;
use support::proxy::{Fault, Proxy};
use tokio::sync::Notify;

#[path = "subscription/first.rs"]
mod subscription_first;
#[path = "subscription/next.rs"]
mod subscription_next;

const CHANGE_VISIBILITY: &str = "ChangeMessageVisibilityBatch";

// The queue's visibility timeout is 40 s, so the heartbeat extends the message 8 s before its
// end. The proxy leaves that extension unanswered for the call timeout of 7 s: longer than
// the broker's grace for the holders plus the receivers' stop, shorter than what is left of
// the visibility. So the message is visible right after the shutdown only if the requeue
// queued behind the extension (visibility 0) went out before it returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_a_requeue_behind_a_silent_extension_is_applied_before_the_shutdown_returns() {
    let client = support::client().await;
    let name = support::unique("rs-shutdown");
    let url = support::create_queue(&client, &name, 40).await;
    support::send(&client, &url, &["the invoice".to_owned()]).await;
    let proxy = Proxy::start().await;
    let api = AwsSqs::from_sdk_config(&support::sdk_config_at(&proxy.url()).await)
        .with_call_timeout(Duration::from_secs(7));
    proxy.inject(Some(CHANGE_VISIBILITY), 1.0, &[Fault::Silence]);
    let queue = SqsQueue::new(&name)
        .visibility(Duration::from_secs(40))
        .wait(Duration::from_secs(1));
    let (connected, subscriber, delivery) = first_delivery(SqsBroker::new().api(api), queue).await;
    support::eventually(
        Duration::from_secs(60),
        "the heartbeat extends the message while it is handled",
        || proxy.counts().action(CHANGE_VISIBILITY).injected_total() >= 1,
    )
    .await;
    // SQS answers again from now on; the extension under way stays unanswered, and the
    // requeue of the same message waits behind it.
    proxy.clear_faults();
    delivery.nack(true).await.expect("queued");
    drop(subscriber);
    connected.shutdown().await.expect("shutdown");
    // A visibility change went to SQS before the shutdown returned, so the message below is
    // back because of it, not only because its visibility lapsed meanwhile.
    let changes = proxy.counts().action(CHANGE_VISIBILITY);
    assert!(
        changes.forwarded >= 1,
        "a visibility change reached SQS before the shutdown returned: {changes:?}"
    );
    let back = support::receive_raw(&client, &url, 0, 30).await;
    assert_eq!(
        back.len(),
        1,
        "the message is back in the queue as the shutdown returns: {:?}",
        proxy.counts().action(CHANGE_VISIBILITY)
    );
    support::delete_queue(&client, &url).await;
}

/// How long the in-process SQS takes to answer a heartbeat extension: longer than the broker's
/// grace for the holders of a subscription, shorter than the heartbeat's margin on the queue's
/// visibility timeout of five minutes (one minute), so the message stays hidden throughout.
const SLOW_EXTENSION: Duration = Duration::from_secs(30);

/// The in-process SQS, answering every extension (a visibility change to more than zero
/// seconds other than `retry_after_secs`, which no handler asked for) [`SLOW_EXTENSION`] late,
/// and telling `extending` when one is under way.
fn slow_extensions(
    sqs: InProcessSqs,
    extending: Arc<Notify>,
    retry_after_secs: u32,
) -> Answered<InProcessSqs> {
    Answered::new(sqs).visibility_changes(move |inner, queue_url, entries| {
        let extension = entries
            .iter()
            .any(|&(_, seconds)| seconds > 0 && seconds != retry_after_secs);
        let extending = Arc::clone(&extending);
        Box::pin(async move {
            if extension {
                extending.notify_one();
                tokio::time::sleep(SLOW_EXTENSION).await;
            }
            inner
                .change_message_visibility_batch(queue_url, entries)
                .await
        })
    })
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_queued_behind_a_slow_extension_is_answered_before_the_shutdown_returns() {
    let retry_after = Duration::from_secs(600);
    let sqs = InProcessSqs::journaled();
    sqs.send("slow-extensions", "the invoice").expect("sent");
    let extending = Arc::new(Notify::new());
    let broker = SqsBroker::new().api(slow_extensions(
        sqs.clone(),
        Arc::clone(&extending),
        u32::try_from(retry_after.as_secs()).expect("seconds"),
    ));
    let queue = SqsQueue::new("slow-extensions").visibility(Duration::from_secs(300));
    let (connected, subscriber, delivery) = first_delivery(broker, queue).await;
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
