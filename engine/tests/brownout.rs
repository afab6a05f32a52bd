//! The heartbeat through a brownout: `ChangeMessageVisibilityBatch` throttled for longer than
//! one call's retry budget. On the in-process SQS (a test double on tokio's clock), behind a
//! decorator that throttles the visibility calls of a window of time.
//!
//! A paused clock is the right tool here: the handler runs for ten minutes of tokio's time and
//! the throttling window is placed to the second, with no real waiting and nothing left to the
//! scheduling of a loaded machine.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{
    BoxFuture, CallError, CallErrorKind, Engine, EntryResult, Message, Outcome, SqsDecorator,
};
use tokio::time::Instant;

const QUEUE: &str = "brownout";

/// The in-process SQS, with every `ChangeMessageVisibilityBatch` made within `throttled`
/// (counted from `start`) refused as SQS refuses a throttled call.
struct ThrottledVisibility {
    sqs: InProcessSqs,
    start: Instant,
    throttled: Range<Duration>,
    /// Visibility calls refused.
    refused: AtomicUsize,
}

impl SqsDecorator for ThrottledVisibility {
    type Inner = InProcessSqs;

    fn inner(&self) -> &InProcessSqs {
        &self.sqs
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        if self.throttled.contains(&self.start.elapsed()) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Box::pin(async {
                Err(CallError::new(CallErrorKind::Throttled, "rate exceeded")
                    .with_code("ThrottlingException"))
            });
        }
        Box::pin(sqs_engine::SqsApi::change_message_visibility_batch(
            &self.sqs, queue_url, entries,
        ))
    }
}

#[tokio::test(start_paused = true)]
async fn a_throttling_burst_longer_than_a_calls_retries_does_not_hand_a_running_message_out_again()
{
    // Visibility 300 s: the heartbeat's margin is 60 s, so the first extension falls due at
    // 240 s, in the middle of 15 s of throttling (235 s to 250 s), longer than one call's
    // retries (the default backoff spends about 10 s at most).
    let sqs = InProcessSqs::journaled();
    sqs.send(QUEUE, "ten minutes of work").expect("sent");
    let api = Arc::new(ThrottledVisibility {
        sqs: sqs.clone(),
        start: Instant::now(),
        throttled: Duration::from_secs(235)..Duration::from_secs(250),
        refused: AtomicUsize::new(0),
    });
    let starts = Arc::new(AtomicUsize::new(0));
    let started = Arc::clone(&starts);
    let stats = Engine::builder()
        .api(Arc::clone(&api))
        .queue(QUEUE)
        .visibility_timeout(Duration::from_secs(300))
        .build()
        .expect("engine")
        .run(
            move |_message: Message| {
                started.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::time::sleep(Duration::from_secs(600)).await;
                    Outcome::Ack
                }
            },
            tokio::time::sleep(Duration::from_secs(660)),
        )
        .await
        .expect("runs");
    assert!(
        api.refused.load(Ordering::SeqCst) > 1,
        "the burst refused more than one call's first attempt"
    );
    assert_eq!(
        starts.load(Ordering::SeqCst),
        1,
        "the message was handed out again while its handler ran: {stats:?}"
    );
    assert_eq!(stats.messages_received, 1);
    assert_eq!(stats.acked.ok, 1);
    assert_eq!(stats.late_settlements, 0);
    assert_eq!(stats.extensions.failed, 0, "no extension was given up");
    let counts = sqs.counts(QUEUE);
    assert_eq!(
        (counts.visible, counts.in_flight, counts.delayed),
        (0, 0, 0),
        "deleted at the end"
    );
}
