//! The driver's retry rules, against a scripted stand-in for SQS on a paused clock. What
//! SQS itself does is proven against LocalStack in `tests/`.

use std::time::Duration;

use super::coalescer::CoalescerConfig;
use super::*;
use crate::metrics::StatsCells;
use crate::receive::queue::{OpenOptions, QueueRuntime};
use crate::sqs::backoff::Backoff;
use crate::stand_in::StandIn;

async fn queue(api: Arc<StandIn>) -> Arc<QueueRuntime> {
    open(api, None).await
}

/// A queue with a 30 s visibility timeout and the heartbeat on.
async fn queue_with_heartbeat(api: Arc<StandIn>) -> Arc<QueueRuntime> {
    open(api, Some(None)).await
}

async fn open(api: Arc<StandIn>, heartbeat: Option<Option<Duration>>) -> Arc<QueueRuntime> {
    let (queue, _) = QueueRuntime::open(
        api,
        OpenOptions {
            queue: "q".into(),
            visibility_timeout: heartbeat.map(|_| 30),
            backoff: Backoff::new(Duration::from_millis(100), Duration::from_secs(1), 4),
            coalescer: CoalescerConfig {
                max_batch: 10,
                max_wait: Duration::from_millis(5),
                max_in_flight: 4,
            },
            heartbeat,
            redrive: None,
            create_if_missing: false,
            health: crate::health::HealthCells::new("q", crate::health::DEFAULT_GIVE_UP_AFTER),
            answers: crate::settle::Answers::Awaited,
        },
        Arc::new(StatsCells::default()),
    )
    .await
    .expect("opens");
    Arc::new(queue)
}

fn request(receipt: &str, outcome: Outcome) -> Request {
    let (lane, visibility) = match outcome {
        Outcome::Ack | Outcome::Drop => (Lane::Delete, None),
        Outcome::Retry => (Lane::Visibility, Some(Duration::ZERO)),
        Outcome::RetryAfter(d) => (Lane::Visibility, Some(d)),
    };
    Request {
        receipt: Arc::from(receipt),
        outcome,
        lane,
        visibility: visibility.map(|delay| VisibilityTarget {
            delay,
            window_end: Instant::now() + crate::limits::MAX_VISIBILITY,
        }),
        message_id: Arc::from(format!("id-{receipt}")),
        key: None,
        visible_until: Instant::now() + Duration::from_secs(30),
        slot: None,
        on_answer: None,
    }
}

/// Starts the queue's settlement driver; cancel the token and wait for the tracker to stop
/// it once everything is sent.
fn start_driver(queue: &Arc<QueueRuntime>) -> TaskTracker {
    let tracker = TaskTracker::new();
    tracker.spawn(run(Arc::clone(&queue.settler), tracker.clone()));
    tracker
}

/// Stops a driver started by [`start_driver`] once everything is sent.
async fn stop_driver(queue: &QueueRuntime, tracker: TaskTracker) {
    queue.settler.drain();
    tracker.close();
    tracker.wait().await;
}

/// Registers the message `r` (id `id-r`) with the heartbeat: its deadline 30 s from now, its
/// 12-hour window ending `window_end` from now.
fn register_r(queue: &QueueRuntime, window_end: Duration) -> Option<u64> {
    let now = Instant::now();
    let deadline = now + Duration::from_secs(30);
    queue.settler.register(
        Arc::from("r"),
        Arc::from("id-r"),
        deadline,
        now + window_end,
    )
}

/// Starts a driver, settles `requests` at once, drains, and returns their answers.
async fn settle_all(
    queue: &Arc<QueueRuntime>,
    requests: Vec<Request>,
) -> Vec<Result<(), SettleError>> {
    let tracker = start_driver(queue);
    let settlements: Vec<_> = requests
        .into_iter()
        .map(|r| enqueue(&queue.settler, r))
        .collect();
    let mut answers = Vec::new();
    for settlement in settlements {
        answers.push(settlement.await);
    }
    stop_driver(queue, tracker).await;
    answers
}

fn throttled() -> CallError {
    CallError::new(CallErrorKind::Throttled, "slow down")
}

fn failed(code: &str, sender_fault: bool) -> EntryResult {
    EntryResult::Failed(EntryFailure {
        code: code.into(),
        sender_fault,
        message: None,
    })
}

#[tokio::test(start_paused = true)]
async fn a_throttled_call_is_retried_after_a_backoff_and_then_succeeds() {
    let api = StandIn::scripted(vec![Err(throttled()), Err(throttled())]);
    let queue = queue(Arc::clone(&api)).await;
    let answers = settle_all(&queue, vec![request("a", Outcome::Ack)]).await;
    assert!(answers[0].is_ok(), "{answers:?}");
    assert_eq!(api.calls().len(), 3);
    let stats = queue.metrics_stats();
    assert_eq!(stats.delete_message_batch.failed, 2);
    assert_eq!(stats.delete_message_batch.ok, 1);
}

#[tokio::test(start_paused = true)]
async fn a_call_that_keeps_failing_fails_each_entry_once_the_budget_is_spent() {
    let api = StandIn::scripted((0..10).map(|_| Err(throttled())).collect());
    let queue = queue(Arc::clone(&api)).await;
    let started = Instant::now();
    let answers = settle_all(
        &queue,
        vec![request("a", Outcome::Ack), request("b", Outcome::Ack)],
    )
    .await;
    assert_eq!(api.calls().len(), 4, "the budget is four attempts");
    for answer in &answers {
        assert!(
            matches!(answer, Err(SettleError::Failed { attempts: 4, .. })),
            "{answer:?}"
        );
    }
    assert!(
        started.elapsed() <= Duration::from_millis(100 + 200 + 400),
        "the waits stay under the backoff ceilings"
    );
}

#[tokio::test(start_paused = true)]
async fn a_permanent_call_failure_is_not_retried() {
    let api = StandIn::scripted(vec![Err(CallError::new(CallErrorKind::AccessDenied, "no"))]);
    let queue = queue(Arc::clone(&api)).await;
    let answers = settle_all(&queue, vec![request("a", Outcome::Ack)]).await;
    assert_eq!(api.calls().len(), 1);
    assert!(matches!(
        answers[0],
        Err(SettleError::Failed { attempts: 1, .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn only_the_entries_that_failed_transiently_are_sent_again() {
    let api = StandIn::scripted(vec![Ok(vec![
        EntryResult::Ok,
        failed("InternalError", false),
        failed("ReceiptHandleIsInvalid", false),
    ])]);
    let queue = queue(Arc::clone(&api)).await;
    let answers = settle_all(
        &queue,
        vec![
            request("a", Outcome::Ack),
            request("b", Outcome::Ack),
            request("c", Outcome::Ack),
        ],
    )
    .await;
    assert_eq!(api.calls(), vec![vec!["a", "b", "c"], vec!["b"]]);
    assert!(answers[0].is_ok());
    assert!(answers[1].is_ok(), "retried and applied");
    assert!(
        matches!(&answers[2], Err(SettleError::Rejected { code, .. }) if code == "ReceiptHandleIsInvalid"),
        "{:?}",
        answers[2]
    );
}

#[tokio::test(start_paused = true)]
async fn visibility_entries_carry_their_delay_in_whole_seconds_rounded_up() {
    let api = StandIn::scripted(Vec::new());
    let queue = queue(Arc::clone(&api)).await;
    settle_all(
        &queue,
        vec![
            request("a", Outcome::Retry),
            request("b", Outcome::RetryAfter(Duration::from_millis(2_100))),
        ],
    )
    .await;
    assert_eq!(api.calls(), vec![vec!["a=0", "b=3"]]);
}

#[tokio::test(start_paused = true)]
async fn a_settlement_after_the_engine_stopped_fails_at_once() {
    let api = StandIn::scripted(Vec::new());
    let queue = queue(Arc::clone(&api)).await;
    settle_all(&queue, Vec::new()).await;
    let answer = enqueue(&queue.settler, request("late", Outcome::Ack)).await;
    assert!(
        matches!(answer, Err(SettleError::Stopped { .. })),
        "{answer:?}"
    );
    assert!(api.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_heartbeat_extends_a_slow_message_and_its_retry_after_reaches_sqs_last() {
    let api = StandIn::scripted(Vec::new());
    let queue = queue_with_heartbeat(Arc::clone(&api)).await;
    let tracker = start_driver(&queue);
    let key = register_r(&queue, crate::limits::MAX_VISIBILITY);
    // Extended 6 s before each deadline: at 24 s and at 48 s.
    tokio::time::sleep(Duration::from_secs(50)).await;
    let mut retry = request("r", Outcome::RetryAfter(Duration::from_secs(100)));
    retry.key = key;
    enqueue(&queue.settler, retry).await.expect("applied");
    stop_driver(&queue, tracker).await;
    assert_eq!(api.calls(), vec![vec!["r=30"], vec!["r=30"], vec!["r=100"]]);
    assert_eq!(queue.metrics_stats().extensions.ok, 2);
}

#[tokio::test(start_paused = true)]
async fn an_extension_whose_call_is_refused_is_tried_again_and_one_whose_handle_is_refused_is_given_up()
 {
    // A paused clock: the extension falls due 24 s in, and its retry a second later.
    let api = StandIn::scripted(vec![
        Err(CallError::new(
            CallErrorKind::AccessDenied,
            "credentials expired",
        )),
        Ok(vec![failed("ReceiptHandleIsInvalid", true)]),
    ]);
    let queue = queue_with_heartbeat(Arc::clone(&api)).await;
    let tracker = start_driver(&queue);
    let key = register_r(&queue, crate::limits::MAX_VISIBILITY);
    tokio::time::sleep(Duration::from_secs(24)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        api.calls().len(),
        1,
        "the refused call is not retried at once"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        api.calls().len(),
        2,
        "a call refused as a whole is tried again before the deadline"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        api.calls(),
        vec![vec!["r=30"], vec!["r=30"]],
        "a receipt handle refused for good is not tried again"
    );
    assert_eq!(queue.metrics_stats().extensions.failed, 1);
    assert!(queue.settler.forget(key.expect("tracked")).is_some());
    stop_driver(&queue, tracker).await;
}

#[tokio::test(start_paused = true)]
async fn an_extension_retried_after_its_messages_window_ended_is_not_sent() {
    // The message's 12-hour window ends 25 s in: the extension due at 24 s asks for the
    // second left, its call is throttled, and by its retry (100 ms later) no time is
    // left. Sent, it would ask for 0 s: the message visible at once.
    let api = StandIn::scripted(vec![Err(throttled())]);
    let queue = queue_with_heartbeat(Arc::clone(&api)).await;
    let tracker = start_driver(&queue);
    let key = register_r(&queue, Duration::from_secs(25));
    tokio::time::sleep(Duration::from_secs(40)).await;
    assert_eq!(api.calls(), vec![vec!["r=1"]]);
    assert_eq!(queue.metrics_stats().extensions.ok, 0);
    assert!(queue.settler.forget(key.expect("tracked")).is_some());
    stop_driver(&queue, tracker).await;
}

#[tokio::test(start_paused = true)]
async fn a_batch_call_that_panics_fails_its_entries_and_frees_its_lane() {
    let api = StandIn::panicking();
    let queue = queue(Arc::clone(&api)).await;
    let answers = tokio::time::timeout(
        Duration::from_secs(60),
        settle_all(
            &queue,
            vec![
                request("a", Outcome::Ack),
                request("b", Outcome::Ack),
                request("c", Outcome::Retry),
            ],
        ),
    )
    .await
    .expect("the flusher drains: a panicking call does not hold its lane");
    for answer in &answers {
        assert!(
            matches!(answer, Err(SettleError::Failed { source, attempts: 1, .. }) if source.message.contains("panicked")),
            "{answer:?}"
        );
    }
    let stats = queue.metrics_stats();
    assert_eq!(stats.delete_message_batch.failed, 1);
    assert_eq!(stats.change_message_visibility_batch.failed, 1);
    assert!(
        queue.settler.lock().close_if_done(),
        "nothing pending, no call in flight"
    );
}

#[tokio::test(start_paused = true)]
async fn a_dropped_settlement_is_sent_all_the_same() {
    let api = StandIn::scripted(Vec::new());
    let queue = queue(Arc::clone(&api)).await;
    let tracker = start_driver(&queue);
    drop(enqueue(&queue.settler, request("a", Outcome::Ack)));
    stop_driver(&queue, tracker).await;
    assert_eq!(api.calls(), vec![vec!["a"]]);
    assert_eq!(queue.metrics_stats().acked.ok, 1);
}

/// On a paused clock (the heartbeat's deadlines are tokio's): a receiver waiting for the
/// settlement backlog to clear wakes when deliveries dropped unsettled take their pending
/// extensions out of it, though no batch goes out and no call finishes.
#[tokio::test(start_paused = true)]
async fn a_backlog_cleared_by_dropped_deliveries_wakes_the_waiting_receivers() {
    let api = StandIn::scripted(Vec::new());
    let queue = queue_with_heartbeat(api).await;
    let start = Instant::now();
    let keys: Vec<u64> = (0..100)
        .filter_map(|i| {
            queue.settler.register(
                Arc::from(format!("r{i}")),
                Arc::from(format!("id-{i}")),
                start + Duration::from_secs(30),
                start + crate::limits::MAX_VISIBILITY,
            )
        })
        .collect();
    assert_eq!(keys.len(), 100);
    // Every extension is due (6 s before the deadline). No driver runs: the four calls
    // allowed take forty of them and never finish; sixty wait, a backlog.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let batches = queue.settler.lock().poll(Instant::now());
    assert_eq!(batches.len(), 4);
    assert!(queue.settler.lock().is_backlogged());
    let waiter = tokio::spawn({
        let queue = Arc::clone(&queue);
        async move { queue.settler.until_not_backlogged().await }
    });
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished(), "the receiver waits for the backlog");
    for key in keys {
        queue.settler.forget(key);
    }
    assert!(!queue.settler.lock().is_backlogged());
    tokio::time::timeout(Duration::from_secs(60), waiter)
        .await
        .expect("the receiver wakes once the backlog is gone")
        .expect("the waiter ends");
}

/// On a paused clock: a delete SQS answers after the message's visibility deadline is not
/// reported as done (SQS answers a delete by an outdated receipt handle with success and
/// deletes nothing); a visibility change answered as late is (SQS refuses one by an
/// outdated receipt handle, so its success took effect). Both are counted late.
#[tokio::test(start_paused = true)]
async fn a_delete_answered_after_the_deadline_is_unconfirmed_and_says_how_late() {
    let api = StandIn::scripted(Vec::new());
    let queue = queue(Arc::clone(&api)).await;
    let mut ack = request("a", Outcome::Ack);
    let mut retry = request("b", Outcome::Retry);
    ack.visible_until = Instant::now();
    retry.visible_until = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let answers = settle_all(&queue, vec![ack, retry]).await;
    assert!(
        matches!(
            &answers[0],
            Err(SettleError::Unconfirmed { message_id, late_by, .. })
                if message_id == "id-a" && *late_by >= Duration::from_secs(3)
        ),
        "{:?}",
        answers[0]
    );
    assert!(answers[1].is_ok(), "{:?}", answers[1]);
    assert_eq!(queue.metrics_stats().late_settlements, 2);
}

#[tokio::test(start_paused = true)]
async fn calls_that_got_no_answer_are_made_again_one_at_a_time() {
    // Every call made in the first 25 s gets no answer and fails 10 s later, as against an
    // overloaded server that still works through the calls its clients gave up on.
    let api =
        StandIn::receiving_script_browning_out(Vec::new(), Duration::ZERO, Duration::from_secs(25));
    let queue = queue(Arc::clone(&api)).await;
    let watched = Arc::clone(&api);
    let during = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(24)).await;
        watched.calls().len()
    });
    let requests = (0..40)
        .map(|i| request(&format!("r{i}"), Outcome::Ack))
        .collect();
    let answers = settle_all(&queue, requests).await;
    // Four calls of ten at first; their retries take turns, each turn one call timing out.
    assert_eq!(
        during.await.expect("watcher"),
        4 + 2,
        "calls made while the server gave no answer"
    );
    // Applied past the messages' 30 s visibility, so unconfirmed; none given up.
    assert!(
        answers
            .iter()
            .all(|a| matches!(a, Err(SettleError::Unconfirmed { .. }))),
        "{answers:?}"
    );
}
