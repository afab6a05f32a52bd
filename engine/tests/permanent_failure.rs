//! Failures that stop an engine's work and that retrying cannot mend: deletes refused by a role
//! without `sqs:DeleteMessage`, receives refused by the queue's KMS key. The engine reports
//! itself unhealthy from the first such failure and, after `give_up_after` of nothing else,
//! `run` returns `Error::GaveUp` naming the call, without anybody asking it to stop.
//!
//! On the in-process SQS (a test double on tokio's clock) with a decorator that refuses the
//! call, on a paused clock: the timing (unhealthy at once, giving up after the time allowed,
//! redeliveries after the visibility timeout) is the behaviour under test, and a paused clock
//! runs the minutes it takes in no real time. LocalStack does not enforce IAM or KMS key
//! policies, so it cannot refuse these calls for real.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{
    BoxFuture, CallError, CallErrorKind, Engine, Error, Phase, ReceiveRequest, ReceivedMessage,
    SqsDecorator,
};
use sqs_engine_test_support::{Answered, counting_acks};

const QUEUE: &str = "orders";
const GIVE_UP_AFTER: Duration = Duration::from_secs(30);

/// The in-process SQS, with its deletes refused as a role without `sqs:DeleteMessage` has them
/// refused.
fn deletes_denied(sqs: InProcessSqs) -> Answered<InProcessSqs> {
    Answered::new(sqs).deletes(|_, _, _| {
        Box::pin(async {
            Err(CallError::new(
                CallErrorKind::AccessDenied,
                "not authorized to perform: sqs:DeleteMessage",
            )
            .with_code("AccessDenied"))
        })
    })
}

/// The in-process SQS, with its receives refused as SQS refuses them when the caller may not
/// use the queue's KMS key.
struct KeyDenied(InProcessSqs);

impl SqsDecorator for KeyDenied {
    type Inner = InProcessSqs;

    fn inner(&self) -> &InProcessSqs {
        &self.0
    }

    fn receive<'a>(
        &'a self,
        _request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        Box::pin(async {
            Err(CallError::new(
                CallErrorKind::KmsRefused,
                "the caller does not have the required KMS access",
            )
            .with_code("KMS.AccessDeniedException"))
        })
    }
}

/// What `run` returned and what health said along the way.
struct Ended {
    result: Result<sqs_engine::Stats, Error>,
    unhealthy_after: Duration,
    end: sqs_engine::Health,
}

impl Ended {
    /// Checks that the engine was unhealthy from the first refused call (`refused` names it)
    /// and that `run` gave up on `action`, no sooner than the time allowed; returns how long
    /// the call had been failing and its last error.
    fn gave_up_on(&self, action: &str, refused: &str) -> (Duration, &CallError) {
        assert!(
            self.unhealthy_after < Duration::from_secs(1),
            "unhealthy from the first {refused}: {:?}",
            self.unhealthy_after
        );
        match &self.result {
            Err(Error::GaveUp {
                action: gave_up_on,
                failing_for,
                source,
                ..
            }) => {
                assert_eq!(*gave_up_on, action);
                assert!(*failing_for >= GIVE_UP_AFTER, "{failing_for:?}");
                (*failing_for, source)
            }
            other => panic!("expected Error::GaveUp, got {other:?}"),
        }
    }
}

/// Runs an engine on `api` that acks every message, with nobody asking it to stop, until it
/// returns (at most ten minutes on the paused clock); notes how soon it was unhealthy.
async fn run_until_it_returns(api: impl sqs_engine::SqsApi, handled: Arc<AtomicUsize>) -> Ended {
    let engine = Engine::builder()
        .api(api)
        .queue(QUEUE)
        .visibility_timeout(Duration::from_secs(5))
        .give_up_after(GIVE_UP_AFTER)
        .build()
        .expect("valid settings");
    let health = engine.health();
    let started = tokio::time::Instant::now();
    let running = tokio::spawn(engine.run(counting_acks(&handled), std::future::pending()));
    let mut unhealthy_after = None;
    let deadline = started + Duration::from_secs(600);
    while !running.is_finished() && tokio::time::Instant::now() < deadline {
        if unhealthy_after.is_none() && !health.snapshot().is_healthy() {
            unhealthy_after = Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        running.is_finished(),
        "run returns on its own: {}",
        health.snapshot()
    );
    let result = running.await.expect("the engine task does not panic");
    Ended {
        result,
        unhealthy_after: unhealthy_after.expect("the engine was unhealthy before it returned"),
        end: health.snapshot(),
    }
}

// Paused clock: the engine's timers (redelivery after the visibility timeout, give_up_after)
// run in no real time.
#[tokio::test(start_paused = true)]
async fn refused_deletes_make_the_engine_unhealthy_and_run_give_up() {
    let sqs = InProcessSqs::new();
    sqs.send(QUEUE, "never deleted").expect("sent");
    let handled = Arc::new(AtomicUsize::new(0));
    let ended = run_until_it_returns(deletes_denied(sqs.clone()), Arc::clone(&handled)).await;

    let (failing_for, source) = ended.gave_up_on("DeleteMessageBatch", "refused delete");
    assert!(
        failing_for < GIVE_UP_AFTER + Duration::from_secs(10),
        "gave up at the first refusal past the time allowed: {failing_for:?}"
    );
    assert_eq!(source.kind, CallErrorKind::AccessDenied);
    assert!(
        ended.end.gave_up && ended.end.phase == Phase::Stopped,
        "{}",
        ended.end
    );
    assert!(
        handled.load(Ordering::SeqCst) > 1,
        "the message came back after each refused delete"
    );
    let left = sqs.counts(QUEUE);
    assert_eq!(left.visible + left.in_flight, 1, "nothing was deleted");
}

// Paused clock: the receivers' backoff and give_up_after run in no real time.
#[tokio::test(start_paused = true)]
async fn receives_refused_by_the_kms_key_make_the_engine_unhealthy_and_run_give_up() {
    let sqs = InProcessSqs::new();
    sqs.send(QUEUE, "encrypted").expect("sent");
    let handled = Arc::new(AtomicUsize::new(0));
    let ended = run_until_it_returns(KeyDenied(sqs), Arc::clone(&handled)).await;

    let (_, source) = ended.gave_up_on("ReceiveMessage", "refused receive");
    assert_eq!(source.code.as_deref(), Some("KMS.AccessDeniedException"));
    assert!(ended.end.gave_up, "{}", ended.end);
    assert_eq!(handled.load(Ordering::SeqCst), 0);
}
