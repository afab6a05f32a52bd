use super::*;
use crate::Engine;
use crate::api::CallError;
use crate::receive::count::MIN_USEFUL_RECEIVERS;
use crate::stand_in::{StandIn, full_receives, message};

/// A consumer of `queue` on `api` with one receiver (and a 30 s visibility timeout).
async fn consumer(api: &Arc<StandIn>, queue: &str) -> crate::Consumer {
    Engine::builder()
        .api(Arc::clone(api))
        .queue(queue)
        .receivers(1)
        .visibility_timeout(Duration::from_secs(30))
        .build()
        .expect("engine")
        .consumer()
        .await
        .expect("consumer")
}

/// Drops `delivery` unsettled and shuts the consumer down.
async fn close(mut consumer: crate::Consumer, delivery: crate::Delivery) {
    let handle = consumer.handle();
    drop(delivery);
    consumer.close().await;
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_visibility_deadline_is_counted_from_the_receive_call_not_from_its_answer() {
    let start = Instant::now();
    // SQS may hand the message out (and start its 30 s) as soon as the call arrives, and
    // the answer take 5 s to come back.
    let api = StandIn::receiving(Duration::from_secs(5), vec![message("m")]);
    let mut consumer = consumer(&api, "q").await;
    let delivery = consumer.recv().await.expect("the message");
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    // The heartbeat extends 6 s (a fifth of 30 s) before the deadline SQS may hold: 24 s
    // after the call, not 24 s after the answer.
    tokio::time::sleep_until(start + Duration::from_secs(25)).await;
    assert_eq!(
        api.calls(),
        vec![vec!["m-receipt=30"]],
        "extended before SQS's own deadline"
    );
    close(consumer, delivery).await;
}

#[tokio::test(start_paused = true)]
async fn a_fifo_receive_that_got_no_answer_is_retried_with_the_same_attempt_id() {
    let mut fifo_message = message("m");
    fifo_message
        .attributes
        .insert("MessageGroupId".to_owned(), "g".to_owned());
    let api = StandIn::receiving_script(vec![
        (
            Duration::ZERO,
            Err(CallError::new(CallErrorKind::Network, "connection reset")),
        ),
        (Duration::ZERO, Ok(vec![fifo_message])),
    ]);
    let mut consumer = consumer(&api, "q.fifo").await;
    let delivery = consumer.recv().await.expect("the message, on the retry");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let ids = api.attempt_ids();
    assert_eq!(
        ids.len(),
        3,
        "failed, retried, and the next receive: {ids:?}"
    );
    assert!(ids[0].is_some());
    assert_eq!(ids[1], ids[0], "the retry keeps the attempt id");
    assert_ne!(ids[2], ids[1], "the next receive has an id of its own");
    close(consumer, delivery).await;
}

/// A message of group `g`.
fn fifo_message() -> crate::api::ReceivedMessage {
    let mut fifo_message = message("m");
    fifo_message
        .attributes
        .insert("MessageGroupId".to_owned(), "g".to_owned());
    fifo_message
}

// Paused clock: the outage's minutes pass in no time.
#[tokio::test(start_paused = true)]
async fn a_fifo_receive_retried_past_the_deduplication_window_gets_a_new_attempt_id() {
    // Calls that get no answer for 200 s, then 150 s: the second retry comes 350 s after
    // the first call, past SQS's 5 minutes for an attempt id.
    let api = StandIn::receiving_script(vec![
        (
            Duration::from_secs(200),
            Err(CallError::new(CallErrorKind::Network, "timed out")),
        ),
        (
            Duration::from_secs(150),
            Err(CallError::new(CallErrorKind::Network, "timed out")),
        ),
        (Duration::ZERO, Ok(vec![fifo_message()])),
    ]);
    let mut consumer = consumer(&api, "q.fifo").await;
    let delivery = consumer
        .recv()
        .await
        .expect("the message, on the last retry");
    let ids = api.attempt_ids();
    assert!(ids.len() >= 3, "{ids:?}");
    assert_eq!(
        ids[1], ids[0],
        "a retry within 5 minutes keeps the attempt id"
    );
    assert_ne!(ids[2], ids[1], "a retry past them gets a new one");
    close(consumer, delivery).await;
}

#[tokio::test(start_paused = true)]
async fn a_retried_fifo_receive_counts_the_visibility_deadline_from_the_call_that_answered() {
    let start = Instant::now();
    // The first call's answer is lost 5 s in; the retry, with the same attempt id, gets
    // the message and restarts its visibility timeout (SQS resets it on a retry within the
    // attempt id's 5 minutes).
    let api = StandIn::receiving_script(vec![
        (
            Duration::from_secs(5),
            Err(CallError::new(CallErrorKind::Network, "connection reset")),
        ),
        (Duration::ZERO, Ok(vec![fifo_message()])),
    ]);
    let mut consumer = consumer(&api, "q.fifo").await;
    let delivery = consumer.recv().await.expect("the message, on the retry");
    let answered = Instant::now();
    assert!(answered >= start + Duration::from_secs(5));
    // Extended a margin (6 s) before the deadline: 24 s after the retry, not 24 s after
    // the first call.
    tokio::time::sleep_until(start + Duration::from_secs(25)).await;
    assert!(
        api.calls().is_empty(),
        "not extended 24 s after the first call"
    );
    tokio::time::sleep_until(answered + Duration::from_secs(25)).await;
    assert_eq!(
        api.calls(),
        vec![vec!["m-receipt=30"]],
        "extended from the retry"
    );
    close(consumer, delivery).await;
}

#[tokio::test(start_paused = true)]
async fn a_standard_queue_sends_no_attempt_id() {
    let api = StandIn::receiving(Duration::ZERO, vec![message("m")]);
    let mut consumer = consumer(&api, "q").await;
    let delivery = consumer.recv().await.expect("the message");
    assert_eq!(api.attempt_ids().first(), Some(&None));
    close(consumer, delivery).await;
}

/// Runs an acking engine with up to `receivers` receivers on `api` until `until`.
async fn run_acking(api: &Arc<StandIn>, receivers: usize, until: Duration) {
    run_handling(api, |b| b.receivers(receivers), Duration::ZERO, until).await;
}

/// Runs an engine on `api`, built by `configure`, until `until`, each handler taking
/// `handling` and acking.
async fn run_handling(
    api: &Arc<StandIn>,
    configure: impl FnOnce(crate::EngineBuilder) -> crate::EngineBuilder,
    handling: Duration,
    until: Duration,
) {
    let builder = Engine::builder()
        .api(Arc::clone(api))
        .queue("q")
        .visibility_timeout(Duration::from_secs(30));
    let stats = configure(builder)
        .build()
        .expect("engine")
        .run(
            move |_message: crate::Message| async move {
                if !handling.is_zero() {
                    tokio::time::sleep(handling).await;
                }
                crate::Outcome::Ack
            },
            tokio::time::sleep(until),
        )
        .await
        .expect("runs");
    assert!(stats.messages_received > 0);
}

/// Runs an engine of `workers` on `api` for two seconds, each handling a message for
/// `handling` and acking it; returns the most receives that were under way at once.
async fn most_receives_with_workers(
    api: &Arc<StandIn>,
    workers: usize,
    handling: Duration,
) -> usize {
    run_handling(
        api,
        |b| b.workers(workers),
        handling,
        Duration::from_secs(2),
    )
    .await;
    api.most_receives_under_way()
}

/// How much the `sqs_engine_messages_prefetched` gauge of `queue` moved since the last
/// call (the debugging recorder, which this test binary installs once and no other test
/// here reads, hands out a gauge's value and zeroes it).
fn prefetched_moved(queue: &str) -> f64 {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
    static SNAPSHOTTER: std::sync::OnceLock<Snapshotter> = std::sync::OnceLock::new();
    let snapshotter = SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this test binary");
        snapshotter
    });
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            let ours = key.name() == "sqs_engine_messages_prefetched"
                && key
                    .labels()
                    .any(|l| l.key() == "queue" && l.value() == queue);
            match value {
                DebugValue::Gauge(gauge) if ours => Some(gauge.into_inner()),
                _ => None,
            }
        })
        .sum()
}

#[tokio::test(start_paused = true)]
async fn the_prefetched_gauge_counts_the_messages_waiting_for_a_worker() {
    let queue = "prefetched-gauge";
    // Installed before the consumer registers its gauges.
    let mut gauge = prefetched_moved(queue);
    let api = StandIn::receiving_script(full_receives(0, 1, Duration::ZERO));
    let mut consumer = consumer(&api, queue).await;
    let delivery = consumer.recv().await.expect("a message");
    gauge += prefetched_moved(queue);
    assert_eq!(gauge, 9.0, "nine of ten wait");
    let second = consumer.recv().await.expect("another");
    gauge += prefetched_moved(queue);
    assert_eq!(gauge, 8.0);
    drop(second);
    // Returned at shutdown: none waits any more.
    close(consumer, delivery).await;
    gauge += prefetched_moved(queue);
    assert_eq!(gauge, 0.0);
}

#[tokio::test(start_paused = true)]
async fn full_receives_start_more_receivers_up_to_the_setting() {
    // Every receive takes 50 ms and comes back full: one receiver alone would get 200
    // messages a second.
    let api = StandIn::receiving_script(full_receives(0, 400, Duration::from_millis(50)));
    let watched = Arc::clone(&api);
    let first = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        watched.receives_under_way()
    });
    run_acking(&api, 8, Duration::from_secs(2)).await;
    assert_eq!(
        first.await.expect("watcher"),
        1,
        "one receiver to start with"
    );
    assert_eq!(
        api.most_receives_under_way(),
        8,
        "as many receives in flight as allowed while every one comes back full"
    );
}

#[tokio::test(start_paused = true)]
async fn a_short_round_trip_needs_few_receivers() {
    // 1 ms a receive: eight receivers in flight already carry 80,000 messages a second.
    let api = StandIn::receiving_script(full_receives(0, 400, Duration::from_millis(1)));
    run_acking(&api, 128, Duration::from_secs(2)).await;
    let most = api.most_receives_under_way();
    assert!(
        (2..=MIN_USEFUL_RECEIVERS).contains(&most),
        "{most} receives in flight at once"
    );
}

#[tokio::test(start_paused = true)]
async fn a_long_round_trip_gets_as_many_receivers_as_it_needs() {
    // 15 ms a receive: 90 receives in flight for 60,000 messages a second.
    let api = StandIn::receiving_script(full_receives(0, 4_000, Duration::from_millis(15)));
    run_acking(&api, 128, Duration::from_secs(2)).await;
    assert_eq!(api.most_receives_under_way(), 90);
}

#[tokio::test(start_paused = true)]
async fn idle_workers_get_the_receivers_the_round_trip_is_worth_within_a_few_round_trips() {
    // 15 ms a receive, handlers that ack at once: 90 receives in flight are worth it (as
    // above). The first full receive (15 ms in) starts the eight that measure the unloaded
    // round trip, known 45 ms in; the workers wait for messages and could take far more
    // than the receivers bring, so the receivers triple a round trip and all 90 run 80 ms
    // in. Grown to the eight by threes, and by one a receive past half of those worth it,
    // they were 47 then and 90 only at 100 ms. Sized by the rate the workers take at, which
    // is only what the receivers brought, they are 24 then and 90 only at 140 ms.
    let api = StandIn::receiving_script(full_receives(0, 4_000, Duration::from_millis(15)));
    let watched = Arc::clone(&api);
    let early = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(80)).await;
        watched.most_receives_under_way()
    });
    run_acking(&api, 128, Duration::from_secs(1)).await;
    assert_eq!(early.await.expect("watcher"), 90);
}

#[tokio::test(start_paused = true)]
async fn a_jittery_round_trip_is_not_taken_for_queueing() {
    // Round trips with a tail several times their median (mean 14.3 ms), whatever the
    // receives in flight: worth about 86 receivers. The old rule (no growth while the
    // smoothed round trip was past twice the shortest) held them at 10.
    let jittery = [3, 8, 10, 12, 30, 6, 9, 50, 4, 11];
    let script = (0..6_000)
        .map(|batch| {
            let messages = (0..10)
                .map(|i| message(&format!("m{}", batch * 10 + i)))
                .collect();
            let ms = jittery[batch % jittery.len()];
            (Duration::from_millis(ms), Ok(messages))
        })
        .collect();
    let api = StandIn::receiving_script(script);
    run_acking(&api, 128, Duration::from_secs(2)).await;
    let most = api.most_receives_under_way();
    assert!(
        (40..=90).contains(&most),
        "{most} receives in flight at once"
    );
}

#[tokio::test(start_paused = true)]
async fn busy_workers_start_no_more_receivers() {
    // 50 ms a receive, and four workers that take 100 ms a message: the workers handle 40
    // messages a second, and one receiver brings 200. Receivers start only until two
    // receive batches wait for the workers; after that no worker waits for messages, so
    // none starts, whatever the round trip would allow (128 receivers at 50 ms).
    let api = StandIn::receiving_script(full_receives(0, 400, Duration::from_millis(50)));
    let most = most_receives_with_workers(&api, 4, Duration::from_millis(100)).await;
    assert!(most <= 8, "{most} receives in flight at once");
}

#[tokio::test(start_paused = true)]
async fn receivers_bring_twice_what_the_workers_take() {
    // 50 ms a receive, and 64 workers that take 20 ms a message: they take 3,200 messages a
    // second, which twice over is 32 receives in flight. The round trip alone would be
    // worth 128 (the default cap), and the prefetch has room for all of their batches.
    let api = StandIn::receiving_script(full_receives(0, 1_000, Duration::from_millis(50)));
    let most = most_receives_with_workers(&api, 64, Duration::from_millis(20)).await;
    assert!(
        (16..=40).contains(&most),
        "{most} receives in flight at once"
    );
}

#[tokio::test(start_paused = true)]
async fn receives_that_queue_at_the_server_start_no_more_receivers() {
    // 5 ms for the first 20 receives (the few receivers that measure the unloaded round
    // trip take 16), then 19 ms: the server queues them (short of CPU, say), and more in
    // flight would only wait longer. 19 ms alone would be worth 114 receivers. (Past four
    // times the unloaded round trip, it is measured again: see the test below.)
    let mut script = full_receives(0, 20, Duration::from_millis(5));
    script.extend(full_receives(200, 600, Duration::from_millis(19)));
    let api = StandIn::receiving_script(script);
    run_acking(&api, 128, Duration::from_secs(3)).await;
    // The smoothed round trip passes twice the unloaded one a few full receives after the
    // change, and each of those may have started two more.
    let most = api.most_receives_under_way();
    assert!(most <= 30, "{most} receives in flight at once");
}

#[tokio::test(start_paused = true)]
async fn receives_that_answer_ever_slower_are_measured_again_with_one_in_flight() {
    // 5 ms for the first 20 receives, then 40 ms: eight times the unloaded round trip, as a
    // server falling behind would answer. The receivers are cut to one while it is measured
    // again (16 full receives: 640 ms); here 40 ms is the same whatever the receives in
    // flight, as a slower network would be, so they grow back once it is known.
    let mut script = full_receives(0, 20, Duration::from_millis(5));
    script.extend(full_receives(200, 5_000, Duration::from_millis(40)));
    let api = StandIn::receiving_script(script);
    let remeasuring =
        most_under_way_between(&api, Duration::from_millis(200), Duration::from_millis(600));
    let after = most_under_way_between(&api, Duration::from_secs(2), Duration::from_secs(3));
    run_acking(&api, 128, Duration::from_secs(3)).await;
    assert_eq!(
        remeasuring.await.expect("watcher"),
        1,
        "one receive in flight while the round trip is measured again"
    );
    let after = after.await.expect("watcher");
    assert!(after >= 8, "{after} receives in flight once measured again");
}

#[tokio::test(start_paused = true)]
async fn receiving_waits_while_settlement_is_behind() {
    // Receives answer in 1 ms, deletes take 2 s: without a brake the engine would hold
    // its 4,096 messages, nearly all waiting for a delete.
    let api = StandIn::receiving_script_settling_in(
        full_receives(0, 1_000, Duration::from_millis(1)),
        Duration::from_secs(2),
    );
    run_acking(&api, 128, Duration::from_secs(1)).await;
    let received: usize = api.attempt_ids().len() * 10;
    // 16 calls of ten in flight, as many waiting, the receives under way and the handlers.
    assert!(
        received <= 16 * 10 * 2 + 10 * MIN_USEFUL_RECEIVERS + 64 + 10,
        "{received} messages received while settlement was behind"
    );
}

#[tokio::test(start_paused = true)]
async fn an_idle_queue_costs_one_long_poll_at_a_time() {
    // A backlog that starts eight receivers, then a queue that answers every long poll
    // empty after its 20 s wait.
    let mut script = full_receives(0, 40, Duration::from_millis(50));
    script.extend((0..40).map(|_| (Duration::from_secs(20), Ok(Vec::new()))));
    let api = StandIn::receiving_script(script);
    let watched = Arc::clone(&api);
    let idle = tokio::spawn(async move {
        // Long after the backlog: every receiver but one has ended.
        tokio::time::sleep(Duration::from_secs(90)).await;
        watched.receives_under_way()
    });
    run_acking(&api, 8, Duration::from_secs(100)).await;
    assert!(
        api.most_receives_under_way() > 1,
        "the backlog started more receivers"
    );
    assert_eq!(
        idle.await.expect("watcher"),
        1,
        "one long poll on an idle queue"
    );
}

/// The most receives under way at once between `from` and `to` from now, sampled every 10 ms.
fn most_under_way_between(
    api: &Arc<StandIn>,
    from: Duration,
    to: Duration,
) -> tokio::task::JoinHandle<usize> {
    let watched = Arc::clone(api);
    tokio::spawn(async move {
        tokio::time::sleep(from).await;
        let mut most = 0;
        let end = Instant::now() + (to - from);
        while Instant::now() < end {
            most = most.max(watched.receives_under_way());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        most
    })
}

#[tokio::test(start_paused = true)]
async fn receives_that_time_out_leave_one_receiver_retrying() {
    // A backlog that starts eight receivers, then a server that answers none of them within
    // the call timeout (overloaded, say), for long after.
    let mut script = full_receives(0, 40, Duration::from_millis(50));
    script.extend((0..400).map(|_| {
        (
            Duration::from_secs(10),
            Err(CallError::new(CallErrorKind::Network, "timed out")),
        )
    }));
    let api = StandIn::receiving_script(script);
    // Once the first timeouts are in (the backlog takes well under a second).
    let storm = most_under_way_between(&api, Duration::from_secs(12), Duration::from_secs(90));
    run_acking(&api, 8, Duration::from_secs(90)).await;
    assert!(
        api.most_receives_under_way() > 1,
        "the backlog started more receivers"
    );
    assert_eq!(
        storm.await.expect("watcher"),
        1,
        "one receive at a time against a server that times out"
    );
}

#[tokio::test(start_paused = true)]
async fn settlement_calls_that_time_out_cut_the_receivers_to_one_until_measured_again() {
    // A backlog that starts eight receivers; the delete calls made from 2 s to 4 s get no
    // answer and fail 10 s later, as against an overloaded server (meanwhile the settlement
    // backlog holds receiving back). Once they fail, the round trip is measured again with one
    // receive in flight (16 full receives of 50 ms) before more start.
    let api = StandIn::receiving_script_browning_out(
        full_receives(0, 5_000, Duration::from_millis(50)),
        Duration::from_secs(2),
        Duration::from_secs(4),
    );
    let before = most_under_way_between(&api, Duration::from_secs(1), Duration::from_secs(2));
    let cut = most_under_way_between(
        &api,
        Duration::from_millis(12_300),
        Duration::from_millis(12_700),
    );
    let after = most_under_way_between(&api, Duration::from_secs(16), Duration::from_secs(20));
    run_acking(&api, 8, Duration::from_secs(20)).await;
    assert_eq!(
        before.await.expect("watcher"),
        8,
        "the backlog started eight"
    );
    assert_eq!(
        cut.await.expect("watcher"),
        1,
        "one receive at a time once the settlement calls timed out"
    );
    assert_eq!(
        after.await.expect("watcher"),
        8,
        "grown back once the round trip was measured again"
    );
}

#[tokio::test(start_paused = true)]
async fn full_receives_after_a_throttling_burst_start_the_receivers_again() {
    // A backlog, a burst of eight throttled receives, then a backlog again. The first throttled
    // answer cuts the receivers to one, which meets the rest of the burst retrying with backoff
    // (well under 13 s for seven retries), measures the round trip again (16 full receives of
    // 50 ms) and grows back.
    let mut script = full_receives(0, 40, Duration::from_millis(50));
    script.extend((0..8).map(|_| {
        (
            Duration::from_millis(50),
            Err(CallError::new(CallErrorKind::Throttled, "slow down")),
        )
    }));
    script.extend(full_receives(400, 4_000, Duration::from_millis(50)));
    let api = StandIn::receiving_script(script);
    let during = most_under_way_between(&api, Duration::from_millis(500), Duration::from_secs(2));
    let after = most_under_way_between(&api, Duration::from_secs(20), Duration::from_secs(24));
    run_acking(&api, 8, Duration::from_secs(24)).await;
    assert_eq!(
        during.await.expect("watcher"),
        1,
        "one receive retrying through the burst"
    );
    assert_eq!(
        after.await.expect("watcher"),
        8,
        "grown back to the setting"
    );
}
