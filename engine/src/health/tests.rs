use super::*;

fn denied() -> CallError {
    CallError::new(CallErrorKind::AccessDenied, "no")
}

#[test]
fn an_engine_that_could_not_open_its_queue_is_unhealthy_and_stopped() {
    let cells = HealthCells::new("q", DEFAULT_GIVE_UP_AFTER);
    assert!(
        cells.snapshot().is_healthy(),
        "starting, nothing failed yet"
    );
    cells.failed_to_open();
    let health = cells.snapshot();
    assert!(!health.is_healthy());
    assert!(!health.is_ready());
    assert_eq!(health.phase, Phase::Stopped);
}

#[tokio::test(start_paused = true)]
async fn a_transient_failure_keeps_the_engine_healthy() {
    let cells = HealthCells::new("q", Duration::from_secs(10));
    cells.running();
    let throttled = CallError::new(CallErrorKind::Throttled, "slow down");
    for _ in 0..100 {
        assert_eq!(cells.receive_failed(&throttled), AfterFailure::Retry);
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    let health = cells.snapshot();
    assert!(health.is_healthy() && health.is_ready(), "{health}");
    assert_eq!(health.consecutive_failures, 100);
}

#[tokio::test(start_paused = true)]
async fn a_permanent_failure_is_unhealthy_at_once_and_gives_up_after_the_time_allowed() {
    let cells = HealthCells::new("q", Duration::from_secs(10));
    cells.running();
    assert_eq!(cells.receive_failed(&denied()), AfterFailure::Retry);
    let health = cells.snapshot();
    assert!(!health.is_healthy() && !health.is_ready(), "{health}");
    tokio::time::advance(Duration::from_secs(9)).await;
    assert_eq!(cells.receive_failed(&denied()), AfterFailure::Retry);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(cells.receive_failed(&denied()), AfterFailure::GiveUp);
    let gave_up = cells.gave_up().expect("gave up");
    assert_eq!(gave_up.call, Call::Receive);
    assert_eq!(gave_up.error.kind, CallErrorKind::AccessDenied);
    assert_eq!(gave_up.lasted, Duration::from_secs(10));
    assert!(cells.snapshot().gave_up);
    assert!(cells.gave_up_token().is_cancelled(), "the receivers stop");
}

#[tokio::test(start_paused = true)]
async fn a_success_ends_a_permanent_failure() {
    let cells = HealthCells::new("q", Duration::from_secs(10));
    cells.running();
    cells.receive_failed(&denied());
    tokio::time::advance(Duration::from_secs(9)).await;
    cells.receive_succeeded();
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(cells.receive_failed(&denied()), AfterFailure::Retry);
    let health = cells.snapshot();
    assert_eq!(health.failing_permanently_for, Some(Duration::ZERO));
    assert_eq!(health.since_last_receive, Some(Duration::from_secs(5)));
}

fn key_refused() -> CallError {
    CallError::new(CallErrorKind::KmsRefused, "key disabled").with_code("KMS.DisabledException")
}

#[tokio::test(start_paused = true)]
async fn a_receive_refused_by_the_kms_key_is_permanent() {
    let cells = HealthCells::new("q", Duration::from_secs(10));
    cells.running();
    assert_eq!(cells.receive_failed(&key_refused()), AfterFailure::Retry);
    let health = cells.snapshot();
    assert!(!health.is_healthy(), "{health}");
    assert_eq!(health.failing_action, Some("ReceiveMessage"));
    assert!(
        health
            .to_string()
            .contains("failing_action=ReceiveMessage permanent_failure=KMS.DisabledException"),
        "{health}"
    );
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(cells.receive_failed(&key_refused()), AfterFailure::GiveUp);
}

#[tokio::test(start_paused = true)]
async fn refused_deletes_are_unhealthy_at_once_and_give_up_after_the_time_allowed() {
    let cells = HealthCells::new("q", Duration::from_secs(10));
    cells.running();
    cells.receive_succeeded();
    assert_eq!(
        cells.call_failed(Call::Delete, &denied()),
        AfterFailure::Retry
    );
    let health = cells.snapshot();
    assert!(!health.is_healthy() && !health.is_ready(), "{health}");
    assert_eq!(health.failing_action, Some("DeleteMessageBatch"));
    assert_eq!(
        health.permanent_failure.map(|error| error.kind),
        Some(CallErrorKind::AccessDenied)
    );
    assert_eq!(health.consecutive_failures, 0, "receives do not fail");
    assert!(health.last_failure.is_none(), "receives do not fail");
    tokio::time::advance(Duration::from_secs(9)).await;
    // Receives going well do not end the deletes' failure.
    cells.receive_succeeded();
    assert_eq!(
        cells.call_failed(Call::Delete, &denied()),
        AfterFailure::Retry
    );
    assert!(!cells.gave_up_token().is_cancelled());
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        cells.call_failed(Call::Delete, &denied()),
        AfterFailure::GiveUp
    );
    let gave_up = cells.gave_up().expect("gave up");
    assert_eq!(gave_up.call, Call::Delete);
    assert_eq!(gave_up.lasted, Duration::from_secs(10));
    assert!(cells.gave_up_token().is_cancelled(), "the receivers stop");
    assert!(!cells.snapshot().is_healthy());
}

#[tokio::test(start_paused = true)]
async fn a_success_of_that_call_ends_a_refused_settlement() {
    let cells = HealthCells::new("q", Duration::from_secs(10));
    cells.running();
    cells.call_failed(Call::ChangeVisibility, &denied());
    cells.call_failed(Call::Delete, &denied());
    tokio::time::advance(Duration::from_secs(9)).await;
    cells.call_succeeded(Call::Delete);
    let health = cells.snapshot();
    assert_eq!(
        health.failing_action,
        Some("ChangeMessageVisibilityBatch"),
        "a delete's success ends only the deletes' failure: {health}"
    );
    cells.call_succeeded(Call::ChangeVisibility);
    let health = cells.snapshot();
    assert!(health.is_healthy() && health.is_ready(), "{health}");
    assert_eq!(health.failing_permanently_for, None);
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(
        cells.call_failed(Call::Delete, &denied()),
        AfterFailure::Retry,
        "the time allowed starts again"
    );
    assert_eq!(
        cells.snapshot().failing_permanently_for,
        Some(Duration::ZERO)
    );
}

// On a paused clock: the time allowed is measured on tokio's clock.
#[tokio::test(start_paused = true)]
async fn a_transient_failure_between_refusals_neither_heals_nor_restarts_the_time_allowed() {
    // A deleted queue answers NonExistentQueue to every call; a flaky network now and then
    // answers instead. The engine must still give up once the refusals have lasted the
    // time allowed, and stay unhealthy meanwhile.
    let cells = HealthCells::new("q", Duration::from_secs(10));
    cells.running();
    let gone = CallError::new(CallErrorKind::QueueNotFound, "the queue does not exist")
        .with_code("AWS.SimpleQueueService.NonExistentQueue");
    let throttled = CallError::new(CallErrorKind::Throttled, "slow down");
    let refused = CallError::new(CallErrorKind::Network, "connection refused");
    cells.call_failed(Call::Delete, &denied());
    assert_eq!(cells.receive_failed(&gone), AfterFailure::Retry);
    tokio::time::advance(Duration::from_secs(6)).await;
    assert_eq!(
        cells.call_failed(Call::Delete, &throttled),
        AfterFailure::Retry
    );
    assert_eq!(cells.receive_failed(&refused), AfterFailure::Retry);
    let health = cells.snapshot();
    assert!(!health.is_healthy(), "still refused: {health}");
    assert_eq!(health.failing_permanently_for, Some(Duration::from_secs(6)));
    tokio::time::advance(Duration::from_secs(4)).await;
    assert_eq!(cells.receive_failed(&gone), AfterFailure::GiveUp);
    assert_eq!(
        cells.call_failed(Call::Delete, &denied()),
        AfterFailure::GiveUp
    );
    let gave_up = cells.gave_up().expect("gave up");
    assert_eq!(gave_up.error.kind, CallErrorKind::QueueNotFound);
    assert_eq!(gave_up.lasted, Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn a_failure_of_a_kind_that_may_work_again_ends_a_run_of_refusals() {
    let cells = HealthCells::new("q", Duration::from_secs(10));
    cells.running();
    cells.call_failed(Call::Delete, &denied());
    tokio::time::advance(Duration::from_secs(9)).await;
    let invalid = CallError::new(CallErrorKind::Invalid, "a request SQS refused");
    cells.call_failed(Call::Delete, &invalid);
    assert!(cells.snapshot().is_healthy());
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(
        cells.call_failed(Call::Delete, &denied()),
        AfterFailure::Retry
    );
}

#[tokio::test(start_paused = true)]
async fn the_longest_failing_call_is_reported() {
    let cells = HealthCells::new("q", Duration::from_secs(60));
    cells.running();
    cells.call_failed(Call::Delete, &denied());
    tokio::time::advance(Duration::from_secs(3)).await;
    cells.receive_failed(&key_refused());
    let health = cells.snapshot();
    assert_eq!(health.failing_action, Some("DeleteMessageBatch"));
    assert_eq!(health.failing_permanently_for, Some(Duration::from_secs(3)));
    assert_eq!(health.last_failure, Some(key_refused()));
}

#[tokio::test(start_paused = true)]
async fn a_draining_engine_is_healthy_but_not_ready() {
    let cells = HealthCells::new("q", Duration::from_secs(10));
    assert!(
        !cells.snapshot().is_ready(),
        "not ready before its queue is open"
    );
    cells.running();
    assert!(cells.snapshot().is_ready());
    cells.draining();
    let health = cells.snapshot();
    assert!(health.is_healthy() && !health.is_ready(), "{health}");
    cells.running();
    assert_eq!(cells.snapshot().phase, Phase::Draining, "no way back");
}

#[test]
fn the_registry_holds_engines_while_they_live() {
    let cells = HealthCells::new("registry-test-queue", Duration::from_secs(1));
    let named = |name: &str| {
        registry::snapshot()
            .iter()
            .filter(|health| health.queue == name)
            .count()
    };
    assert_eq!(named("registry-test-queue"), 1);
    drop(cells);
    assert_eq!(named("registry-test-queue"), 0);
}
