//! On the in-process SQS (a test double on tokio's clock, which models FIFO groups as SQS
//! does): the gate's order rules through the whole engine. LocalStack proves them against a real
//! SQS in `tests/fifo.rs`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::api::SendEntry;
use crate::testing::InProcessSqs;
use crate::{Engine, Message, Outcome};

const QUEUE: &str = "orders.fifo";

/// A consumer of [`QUEUE`] with one receiver, set further by `configure`.
async fn consumer(
    sqs: &InProcessSqs,
    configure: impl FnOnce(crate::EngineBuilder) -> crate::EngineBuilder,
) -> crate::Consumer {
    crate::testing::unit::consumer(sqs, QUEUE, |engine| configure(engine.receivers(1))).await
}

fn send(sqs: &InProcessSqs, group: &str, seq: usize) {
    sqs.send_entry(
        QUEUE,
        &SendEntry {
            body: format!("{group}:{seq}"),
            attributes: Vec::new(),
            group_id: Some(group.to_owned()),
            deduplication_id: Some(format!("{group}-{seq}")),
        },
    )
    .expect("sent");
}

/// What the handlers saw: per group, (seq, start, end, outcome) in start order.
type Log = Arc<Mutex<HashMap<String, Vec<(usize, Instant, Instant, Outcome)>>>>;

fn parse(message: &Message) -> (String, usize) {
    let (group, seq) = message.body().split_once(':').expect("group:seq");
    (group.to_owned(), seq.parse().expect("seq"))
}

/// Runs an engine with `workers` over `groups` groups of `per_group` messages; the first
/// delivery of some messages is answered `retry` or `retry_after(1 s)`. Returns the log
/// and the engine's stats.
async fn run(
    groups: usize,
    per_group: usize,
    workers: usize,
    order: FifoOrder,
) -> (Log, crate::Stats) {
    let sqs = InProcessSqs::new();
    for seq in 0..per_group {
        for group in 0..groups {
            send(&sqs, &format!("g{group}"), seq);
        }
    }
    let total = groups * per_group;
    let log: Log = Arc::default();
    let done = CancellationToken::new();
    let acked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let engine = Engine::builder()
        .api(sqs.clone())
        .queue(QUEUE)
        .workers(workers)
        .receivers(2)
        .visibility_timeout(Duration::from_secs(30))
        .fifo_order(order)
        .build()
        .expect("engine");
    let handler_log = Arc::clone(&log);
    let handler_done = done.clone();
    let rng = Arc::new(Mutex::new(fastrand::Rng::with_seed(7)));
    let stats = engine
        .run(
            move |message: Message| {
                let log = Arc::clone(&handler_log);
                let done = handler_done.clone();
                let acked = Arc::clone(&acked);
                let pause = Duration::from_micros(rng.lock().expect("rng").u64(0..3_000));
                async move {
                    let start = Instant::now();
                    tokio::time::sleep(pause).await;
                    let (group, seq) = parse(&message);
                    let first = message.receive_count() == 1;
                    let outcome = if first && seq % 7 == 3 {
                        Outcome::Retry
                    } else if first && seq % 11 == 5 {
                        Outcome::RetryAfter(Duration::from_secs(1))
                    } else {
                        Outcome::Ack
                    };
                    log.lock().expect("log").entry(group).or_default().push((
                        seq,
                        start,
                        Instant::now(),
                        outcome,
                    ));
                    if outcome == Outcome::Ack
                        && acked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == total
                    {
                        done.cancel();
                    }
                    outcome
                }
            },
            done.clone().cancelled_owned(),
        )
        .await
        .expect("runs");
    assert_eq!(
        sqs.counts(QUEUE).visible + sqs.counts(QUEUE).in_flight,
        0,
        "all deleted"
    );
    (log, stats)
}

fn check_order(log: &Log, groups: usize, per_group: usize) {
    let log = log.lock().expect("log");
    assert_eq!(log.len(), groups);
    for (group, handled) in log.iter() {
        let acked: Vec<usize> = handled
            .iter()
            .filter(|(_, _, _, outcome)| *outcome == Outcome::Ack)
            .map(|(seq, ..)| *seq)
            .collect();
        assert_eq!(
            acked,
            (0..per_group).collect::<Vec<_>>(),
            "group {group}: acked once each, in send order"
        );
        let mut handled = handled.clone();
        handled.sort_by_key(|(_, start, ..)| *start);
        for pair in handled.windows(2) {
            assert!(
                pair[1].1 >= pair[0].2,
                "group {group}: {} started before {} ended",
                pair[1].0,
                pair[0].0
            );
        }
        // Nothing of the group was handled out of order: each start is the message after
        // the last one acked, or the same one again.
        let mut next = 0;
        for (seq, .., outcome) in &handled {
            assert_eq!(
                *seq, next,
                "group {group}: {seq} handled while {next} was due"
            );
            if *outcome == Outcome::Ack {
                next += 1;
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn each_group_is_handled_one_message_at_a_time_in_order_while_workers_take_other_groups() {
    let (log, stats) = run(20, 30, 64, FifoOrder::Confirmed).await;
    check_order(&log, 20, 30);
    assert!(stats.retried.ok > 0 && stats.retried_after.ok > 0);
    assert!(
        stats.returned_for_order > 0,
        "a retry returns the rest of its group"
    );
}

#[tokio::test(start_paused = true)]
async fn more_groups_than_workers_and_one_group_with_most_messages_keep_their_order() {
    let (log, _) = run(40, 5, 8, FifoOrder::Confirmed).await;
    check_order(&log, 40, 5);
    let (log, _) = run(1, 120, 16, FifoOrder::Outcome).await;
    check_order(&log, 1, 120);
}

#[tokio::test(start_paused = true)]
async fn with_the_outcome_order_groups_keep_their_order_too() {
    let (log, _) = run(10, 20, 32, FifoOrder::Outcome).await;
    check_order(&log, 10, 20);
}

// Paused clock on the in-process SQS, which holds a group back while any of its messages
// is in flight and moves a message received past the cap to the dead-letter queue, as SQS
// does: the 20 s and the rounds of retries pass in no time.
#[tokio::test(start_paused = true)]
async fn messages_sent_behind_one_that_always_fails_are_handled_once_it_is_dead_lettered() {
    const DEAD: &str = "orders-dead.fifo";
    let sqs = InProcessSqs::new();
    for seq in 1..=4 {
        send(&sqs, "g", seq);
    }
    let later = sqs.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(20)).await;
        for seq in 5..=8 {
            send(&later, "g", seq);
        }
    });
    let engine = Engine::builder()
        .api(sqs.clone())
        .queue(QUEUE)
        .create_if_missing(true)
        .max_attempts(3)
        .dead_letter(DEAD)
        .receivers(1)
        .visibility_timeout(Duration::from_secs(30))
        .build()
        .expect("engine");
    let handled: Arc<Mutex<Vec<(usize, u32)>>> = Arc::default();
    let seen = Arc::clone(&handled);
    engine
        .run(
            move |message: Message| {
                let (_, seq) = parse(&message);
                seen.lock()
                    .expect("log")
                    .push((seq, message.receive_count()));
                async move {
                    if seq == 1 {
                        Outcome::Retry
                    } else {
                        Outcome::Ack
                    }
                }
            },
            tokio::time::sleep(Duration::from_secs(120)),
        )
        .await
        .expect("runs");
    let handled = handled.lock().expect("log").clone();
    let m1: Vec<u32> = handled
        .iter()
        .filter(|(seq, _)| *seq == 1)
        .map(|(_, count)| *count)
        .collect();
    assert_eq!(m1, [1, 2, 3], "m1 is handled on each of its three receives");
    let rest: Vec<(usize, u32)> = handled
        .iter()
        .copied()
        .filter(|(seq, _)| *seq != 1)
        .collect();
    // m2-m4 came with m1 in each of its receives: at the cap with it, they go to the
    // dead-letter queue with it. SQS's order forbids handling them before: m1 is on the
    // queue until the receive that moves it, and that receive comes only once nothing of
    // the group is in flight.
    assert_eq!(
        rest,
        [(5, 1), (6, 1), (7, 1), (8, 1)],
        "m5-m8 are handled, in order, on their first receive"
    );
    let mut dead = sqs.bodies(DEAD);
    dead.sort();
    assert_eq!(dead, ["g:1", "g:2", "g:3", "g:4"]);
    assert!(sqs.bodies(QUEUE).is_empty(), "m5-m8 were deleted");
}

#[tokio::test(start_paused = true)]
async fn the_pull_consumer_hands_out_one_delivery_of_a_group_at_a_time() {
    let sqs = InProcessSqs::new();
    for seq in 0..3 {
        send(&sqs, "a", seq);
        send(&sqs, "b", seq);
    }
    let mut consumer = consumer(&sqs, |engine| engine).await;
    let first = consumer.recv().await.expect("a:0");
    let second = consumer.recv().await.expect("b:0");
    assert_eq!(parse(first.message()), ("a".to_owned(), 0));
    assert_eq!(parse(second.message()), ("b".to_owned(), 0));
    assert!(
        tokio::time::timeout(Duration::from_secs(5), consumer.recv())
            .await
            .is_err(),
        "nothing more until a group's turn passes"
    );
    first.settle(Outcome::Ack).await.expect("acked");
    let next = consumer.recv().await.expect("a:1");
    assert_eq!(parse(next.message()), ("a".to_owned(), 1));
    // A retry of b:0 sends the rest of b back; b:0 comes first again.
    second.settle(Outcome::Retry).await.expect("returned");
    let again = consumer.recv().await.expect("b:0 again");
    assert_eq!(parse(again.message()), ("b".to_owned(), 0));
    assert_eq!(again.message().receive_count(), 2);
    let handle = consumer.handle();
    drop((next, again));
    consumer.close().await;
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_delete_answered_after_the_deadline_does_not_start_the_next_of_the_group() {
    use crate::api::SqsApi;

    let sqs = InProcessSqs::new();
    for seq in 0..2 {
        send(&sqs, "a", seq);
    }
    let mut consumer = consumer(&sqs, |engine| {
        engine
            .heartbeat(false)
            .visibility_timeout(Duration::from_secs(2))
    })
    .await;
    let first = consumer.recv().await.expect("a:0");
    assert_eq!(parse(first.message()), ("a".to_owned(), 0));
    let handle = consumer.handle();
    handle.stop_receiving();
    // a:0's visibility lapses and another consumer receives it: the handle the engine
    // holds is outdated, and SQS answers its delete with success, deleting nothing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let url = sqs.queue_url(QUEUE).await.expect("url");
    let stolen = sqs
        .receive(&crate::api::ReceiveRequest {
            queue_url: &url,
            max_messages: 1,
            wait_time: Duration::ZERO,
            visibility_timeout: 60,
            attempt_id: None,
            system_attributes: crate::SystemAttributes::All.names(),
        })
        .await
        .expect("receive");
    assert_eq!(stolen[0].body, "a:0");
    let late = first.settle(Outcome::Ack).await;
    assert!(
        matches!(late, Err(crate::SettleError::Unconfirmed { .. })),
        "SQS answers the outdated delete with success, which confirms nothing: {late:?}"
    );
    let next = tokio::time::timeout(Duration::from_secs(10), consumer.recv()).await;
    assert!(
        !matches!(&next, Ok(Some(delivery)) if parse(delivery.message()).1 == 1),
        "a:1 must not start while a:0 is still on the queue"
    );
    drop(next);
    consumer.close().await;
    handle.shutdown().await;
}

/// The queue runtime of `QUEUE` on a fresh in-process SQS, with `cap` as its redrive
/// policy's `maxReceiveCount`, for deliveries made up by [`made_up`].
async fn runtime(cap: Option<u32>) -> Arc<crate::receive::queue::QueueRuntime> {
    use crate::receive::queue::{OpenOptions, QueueRuntime};
    use crate::settle::coalescer::CoalescerConfig;

    let sqs = InProcessSqs::new();
    send(&sqs, "a", 0);
    let (mut queue, _) = QueueRuntime::open(
        Arc::new(sqs.clone()),
        OpenOptions {
            queue: QUEUE.into(),
            visibility_timeout: Some(30),
            backoff: crate::Backoff::default(),
            coalescer: CoalescerConfig {
                max_batch: 10,
                max_wait: Duration::from_millis(5),
                max_in_flight: 4,
            },
            heartbeat: None,
            redrive: None,
            create_if_missing: false,
            health: crate::health::HealthCells::new(QUEUE, crate::health::DEFAULT_GIVE_UP_AFTER),
            answers: crate::settle::Answers::Awaited,
        },
        Arc::new(crate::metrics::StatsCells::default()),
    )
    .await
    .expect("opens");
    queue.max_receive_count = cap;
    Arc::new(queue)
}

/// A delivery of message `id` of group `a`, at `sequence`, on its `receive_count`th
/// receive.
fn made_up(
    queue: &Arc<crate::receive::queue::QueueRuntime>,
    id: &str,
    sequence: u32,
    receive_count: u32,
) -> Delivery {
    let received = crate::api::ReceivedMessage {
        message_id: id.to_owned(),
        receipt_handle: format!("{id}:{receive_count}"),
        body: format!("a:{sequence}"),
        attributes: HashMap::from([
            ("MessageGroupId".to_owned(), "a".to_owned()),
            ("SequenceNumber".to_owned(), sequence.to_string()),
            (
                "ApproximateReceiveCount".to_owned(),
                receive_count.to_string(),
            ),
        ]),
        message_attributes: HashMap::new(),
    };
    Delivery::new(Arc::clone(queue), received, None, None, Instant::now())
}

// Paused clock: the returns for order the gate sends are settled on the in-process SQS.
#[tokio::test(start_paused = true)]
async fn a_later_message_is_returned_for_order_only_with_a_receive_to_spare() {
    // An emulator hands out later messages of a group while an earlier one, returned for
    // order, is hidden. Returned at its next-to-last receive, a message would be received
    // last with the rest of its group behind an earlier one, and could go back with them
    // to the dead-letter queue without a handler seeing it.
    let queue = runtime(Some(3)).await;
    let gate = Gate::new(FifoOrder::Confirmed);
    let group: Arc<str> = Arc::from("a");
    gate.admit(vec![
        made_up(&queue, "m-0", 0, 1),
        made_up(&queue, "m-1", 1, 1),
    ]);
    let turn = gate.pop_ready().expect("m-0 has the turn");
    // m-0 is retried: m-1 goes back, and the gate waits for it.
    drop(turn);
    gate.finish_turn(&group, "m-0", Fate::BackAt(Instant::now()));
    gate.admit(vec![made_up(&queue, "m-2", 2, 1)]);
    assert!(
        gate.pop_ready().is_none(),
        "on its first receive, m-2 goes back behind m-1"
    );
    gate.admit(vec![made_up(&queue, "m-2", 2, 2)]);
    let handled = gate
        .pop_ready()
        .expect("m-2, a receive from the cap, is handed out");
    assert_eq!(handled.message().id(), "m-2");
    drop(handled);
}

#[tokio::test(start_paused = true)]
async fn the_rest_of_a_group_returned_at_its_last_receive_is_not_waited_for() {
    // m-0 and m-1 at the cap: m-0 goes back, m-1 with it, and SQS moves both to the
    // dead-letter queue at the next receive. m-2, sent after, comes alone and is next.
    let queue = runtime(Some(3)).await;
    let gate = Gate::new(FifoOrder::Confirmed);
    gate.admit(vec![
        made_up(&queue, "m-0", 0, 3),
        made_up(&queue, "m-1", 1, 3),
    ]);
    let turn = gate.pop_ready().expect("m-0 has the turn");
    // Dropped unsettled: back in the queue when its visibility lapses.
    drop(turn);
    assert!(gate.pop_ready().is_none(), "m-1 went back with m-0");
    gate.admit(vec![made_up(&queue, "m-2", 2, 1)]);
    let next = gate.pop_ready().expect("m-2 is handed out");
    assert_eq!(next.message().id(), "m-2");
    drop(next);
}

#[test]
fn the_returned_messages_remembered_stay_bounded_whatever_the_groups() {
    let start = Instant::now();
    let wait = Duration::from_secs(31);
    // 100,000 groups returned at once, none of which comes back.
    let mut state = GateState::default();
    let mut most = 0;
    for group in 0..100_000 {
        let group: Arc<str> = Arc::from(format!("g{group}"));
        state.remember(&group, 1, start + wait, start);
        most = most.max(state.returned.len());
    }
    assert!(most <= REMEMBERED_GROUPS, "{most} groups remembered");
    // One group returned every 10 ms: about 3,100 wait at a time, the rest are swept.
    let mut state = GateState::default();
    let mut most = 0;
    for group in 0..100_000_u32 {
        let now = start + Duration::from_millis(10) * group;
        let group: Arc<str> = Arc::from(format!("g{group}"));
        state.remember(&group, 1, now + wait, now);
        most = most.max(state.returned.len());
    }
    assert!(most <= 2 * 3_100 + 1, "{most} groups remembered");
}

#[tokio::test(start_paused = true)]
async fn a_message_received_again_while_waiting_for_its_turn_is_handled_once() {
    let queue = runtime(None).await;
    let delivery =
        |id: &str, sequence: u32, receive_count: u32| made_up(&queue, id, sequence, receive_count);
    let gate = Gate::new(FifoOrder::Confirmed);
    gate.admit(vec![delivery("m-0", 0, 1), delivery("m-1", 1, 1)]);
    let turn = gate.pop_ready().expect("m-0 has the turn");
    assert_eq!(turn.message().id(), "m-0");
    // m-1's visibility lapsed while it waited; SQS handed it out again.
    gate.admit(vec![delivery("m-1", 1, 2)]);
    let group: Arc<str> = Arc::from("a");
    gate.finish_turn(&group, "m-0", Fate::Deleted);
    let next = gate.pop_ready().expect("m-1 has the turn");
    assert_eq!(
        (next.message().id(), next.message().receive_count()),
        ("m-1", 2),
        "the newer receive"
    );
    gate.finish_turn(&group, "m-1", Fate::Deleted);
    assert!(
        gate.pop_ready().is_none(),
        "the outdated receive of m-1 is not handed out after m-1 was deleted"
    );
    drop((turn, next));
}

#[tokio::test(start_paused = true)]
async fn a_retried_message_received_again_before_its_answer_keeps_its_turn() {
    // m-0 is retried; SQS applies it, and a receive takes m-0 again, with m-1 behind it,
    // before the retry's answer reaches the gate. That receive is m-0 back: it has the
    // turn, and nothing goes back to the queue again.
    let queue = runtime(Some(5)).await;
    let gate = Gate::new(FifoOrder::Confirmed);
    gate.admit(vec![made_up(&queue, "m-0", 0, 1)]);
    let first = gate.pop_ready().expect("m-0 has the turn");
    gate.admit(vec![
        made_up(&queue, "m-0", 0, 2),
        made_up(&queue, "m-1", 1, 1),
    ]);
    assert!(gate.pop_ready().is_none(), "m-0's turn is still under way");
    let group: Arc<str> = Arc::from("a");
    gate.finish_turn(&group, "m-0", Fate::BackAt(Instant::now()));
    let again = gate.pop_ready().expect("m-0 back has the turn");
    assert_eq!(
        (again.message().id(), again.message().receive_count()),
        ("m-0", 2)
    );
    gate.finish_turn(&group, "m-0", Fate::Deleted);
    let next = gate.pop_ready().expect("m-1 is next");
    assert_eq!(next.message().id(), "m-1");
    drop((first, again, next));
}
