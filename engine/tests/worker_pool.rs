//! Several engines sharing one worker pool (`WorkerPool`, `Share`): strict priority and
//! weights between their queues.
//!
//! The first three tests run on the in-process SQS (a test double on tokio's clock) with a
//! paused clock, so that the handlers' time costs no real time and the shares are exact; the
//! last proves priority against LocalStack.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{BatchOutcome, Engine, EngineBuilder, Message, Outcome, Share, WorkerPool};
use sqs_engine_test_support as support;
use tokio_util::sync::CancellationToken;

/// The queues' names in the order their handlers started.
type Starts = Arc<Mutex<Vec<&'static str>>>;

/// A handler that records its queue's name as it starts, then works for `work`.
fn recording(
    starts: &Starts,
    name: &'static str,
    work: Duration,
) -> impl Fn(Message) -> std::pin::Pin<Box<dyn Future<Output = Outcome> + Send>> + Send + Sync + 'static
{
    let starts = Arc::clone(starts);
    move |_message: Message| {
        starts.lock().expect("starts").push(name);
        Box::pin(async move {
            tokio::time::sleep(work).await;
            Outcome::Ack
        })
    }
}

/// Runs one engine per `(name, builder)` with a recording handler until `stop`, and returns
/// the order their handlers started in.
async fn run_lanes(
    lanes: Vec<(&'static str, EngineBuilder)>,
    work: Duration,
    stop: CancellationToken,
) -> Vec<&'static str> {
    let starts: Starts = Arc::default();
    let runs: Vec<_> = lanes
        .into_iter()
        .map(|(name, builder)| {
            let engine = builder.build().expect("engine");
            tokio::spawn(engine.run(
                recording(&starts, name, work),
                stop.clone().cancelled_owned(),
            ))
        })
        .collect();
    for run in runs {
        run.await.expect("no panic").expect("runs");
    }
    Arc::try_unwrap(starts)
        .expect("the handlers are gone")
        .into_inner()
        .expect("starts")
}

/// How many of `name`'s handlers started before the last start of `other`.
fn started_before_last(starts: &[&str], name: &str, other: &str) -> usize {
    let last = starts
        .iter()
        .rposition(|&queue| queue == other)
        .expect("the other queue ran");
    starts[..last]
        .iter()
        .filter(|&&queue| queue == name)
        .count()
}

/// A token cancelled after `after`.
fn stop_after(after: Duration) -> CancellationToken {
    let stop = CancellationToken::new();
    let stopping = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        stopping.cancel();
    });
    stop
}

/// An engine on the in-process SQS for `queue`, with `messages` waiting, on `pool`.
fn in_process(
    sqs: &InProcessSqs,
    queue: &str,
    messages: usize,
    pool: &WorkerPool,
    share: Share,
) -> EngineBuilder {
    for n in 0..messages {
        sqs.send(queue, &format!("{queue}-{n}")).expect("sent");
    }
    Engine::builder()
        .api(sqs.clone())
        .queue(queue)
        .visibility_timeout(Duration::from_secs(60))
        .worker_pool(pool, share)
}

#[tokio::test(start_paused = true)]
async fn a_higher_priority_queue_gets_every_worker_that_frees_up_while_it_has_messages() {
    let sqs = InProcessSqs::new();
    let pool = WorkerPool::new(4).expect("pool");
    let lanes = vec![
        ("low", in_process(&sqs, "low", 60, &pool, Share::default())),
        (
            "high",
            in_process(&sqs, "high", 60, &pool, Share::priority(1)),
        ),
    ];
    let stop = stop_after(Duration::from_secs(60));
    let starts = run_lanes(lanes, Duration::from_millis(100), stop).await;
    assert_eq!(starts.len(), 120, "every message handled once");
    // Before the high queue's first receive lands the low one may take the free workers;
    // after that, none until the high queue is empty.
    let early = started_before_last(&starts, "low", "high");
    assert!(early <= 4, "{early} low before the last high: {starts:?}");
}

#[tokio::test(start_paused = true)]
async fn queues_of_one_priority_share_the_workers_by_weight() {
    let sqs = InProcessSqs::new();
    let pool = WorkerPool::new(4).expect("pool");
    let lanes = vec![
        (
            "heavy",
            in_process(&sqs, "heavy", 300, &pool, Share::weight(3)),
        ),
        (
            "light",
            in_process(&sqs, "light", 300, &pool, Share::weight(1)),
        ),
    ];
    let stop = stop_after(Duration::from_secs(300));
    let starts = run_lanes(lanes, Duration::from_millis(10), stop).await;
    assert_eq!(starts.len(), 600, "every message handled once");
    // While both have messages waiting: the first 300 starts, before the heavy queue runs dry.
    let heavy = starts[..300]
        .iter()
        .filter(|&&queue| queue == "heavy")
        .count();
    assert!(
        (215..=235).contains(&heavy),
        "{heavy} of the first 300 workers to the queue of weight 3"
    );
}

#[tokio::test(start_paused = true)]
async fn a_batch_handler_takes_one_worker_of_the_pool_per_batch() {
    let sqs = InProcessSqs::new();
    let pool = WorkerPool::new(1).expect("pool");
    // Handlers running now, across both engines, and the most at once.
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let work = {
        let (running, most) = (Arc::clone(&running), Arc::clone(&most));
        move || {
            let (running, most) = (Arc::clone(&running), Arc::clone(&most));
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                running.fetch_sub(1, Ordering::SeqCst);
            }
        }
    };
    let batches = in_process(&sqs, "batches", 40, &pool, Share::default())
        .build()
        .expect("engine");
    let singles = in_process(&sqs, "singles", 40, &pool, Share::default())
        .build()
        .expect("engine");
    let stop = stop_after(Duration::from_secs(60));
    let batch_work = work.clone();
    let batch_run = tokio::spawn(batches.run_batches(
        move |messages: Vec<Message>| {
            let work = batch_work();
            async move {
                assert!(!messages.is_empty());
                work.await;
                BatchOutcome::All(Outcome::Ack)
            }
        },
        stop.clone().cancelled_owned(),
    ));
    let single_run = tokio::spawn(singles.run(
        move |_message: Message| {
            let work = work();
            async move {
                work.await;
                Outcome::Ack
            }
        },
        stop.cancelled_owned(),
    ));
    batch_run.await.expect("no panic").expect("runs");
    single_run.await.expect("no panic").expect("runs");
    assert_eq!(most.load(Ordering::SeqCst), 1, "one worker in the pool");
    for queue in ["batches", "singles"] {
        let counts = sqs.counts(queue);
        assert_eq!(
            (counts.visible, counts.in_flight),
            (0, 0),
            "{queue}: every message acked"
        );
    }
}

#[tokio::test]
async fn on_localstack_a_higher_priority_queue_is_served_first() {
    let client = support::client().await;
    let (high, low) = (support::unique("pool-high"), support::unique("pool-low"));
    let high_url = support::create_queue(&client, &high, 30).await;
    let low_url = support::create_queue(&client, &low, 30).await;
    let bodies: Vec<String> = (0..30).map(|n| format!("m{n}")).collect();
    support::send(&client, &high_url, &bodies).await;
    support::send(&client, &low_url, &bodies).await;
    let pool = WorkerPool::new(2).expect("pool");
    let lanes = vec![
        (
            "high",
            support::builder(&high)
                .await
                .worker_pool(&pool, Share::priority(1)),
        ),
        (
            "low",
            support::builder(&low)
                .await
                .worker_pool(&pool, Share::default()),
        ),
    ];
    let stop = CancellationToken::new();
    let stopping = stop.clone();
    let counting = (client.clone(), high_url.clone(), low_url.clone());
    tokio::spawn(async move {
        let (client, high_url, low_url) = counting;
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if support::counts(&client, &high_url).await == (0, 0)
                && support::counts(&client, &low_url).await == (0, 0)
            {
                break;
            }
        }
        stopping.cancel();
    });
    let starts = tokio::time::timeout(
        Duration::from_secs(120),
        run_lanes(lanes, Duration::from_millis(20), stop),
    )
    .await
    .expect("both queues drained within two minutes");
    assert_eq!(starts.len(), 60, "every message handled once: {starts:?}");
    // The low queue may take the workers before the high queue's first receive lands, and
    // between two of its receives; otherwise it waits.
    let early = started_before_last(&starts, "low", "high");
    assert!(early <= 6, "{early} low before the last high: {starts:?}");
    support::delete_queue(&client, &high_url).await;
    support::delete_queue(&client, &low_url).await;
}
