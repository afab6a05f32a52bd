//! A RustStream service on a FIFO queue keeps each group's order whatever workers mode it
//! mounts with: `workers(n)` (any message to any worker) and `workers_by_key(n)` (a worker
//! per key), on LocalStack. The broker hands the framework at most one unsettled delivery per
//! group, so even unkeyed workers never run two of a group at once.

use sqs_engine_test_support as support;

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use sqs_engine::prelude::*;
use tokio::time::Instant;

/// What the handlers saw, per group (the test's name and the group): (seq, start, end, acked).
type Runs = HashMap<String, Vec<(usize, Instant, Instant, bool)>>;

static RUNS: Mutex<Option<Runs>> = Mutex::new(None);

fn record(group: String, run: (usize, Instant, Instant, bool)) {
    let mut runs = RUNS.lock().unwrap_or_else(PoisonError::into_inner);
    runs.get_or_insert_with(HashMap::new)
        .entry(group)
        .or_default()
        .push(run);
}

fn runs_of(test: &str) -> Runs {
    let runs = RUNS.lock().unwrap_or_else(PoisonError::into_inner);
    runs.iter()
        .flatten()
        .filter(|(group, _)| group.starts_with(test))
        .map(|(group, runs)| (group.clone(), runs.clone()))
        .collect()
}

/// A body as SQS delivered it, read without a codec: `test:group:seq`.
#[derive(Deserialized)]
struct Body<'a>(&'a [u8]);

/// Sleeps 0–3 ms; the first delivery of every fourth message is retried.
#[subscriber(SqsQueue)]
async fn handle(body: &Body<'_>, cx: &mut Context<'_>) -> HandlerOutcome {
    let start = Instant::now();
    let text = String::from_utf8_lossy(body.0).into_owned();
    let Some((group, seq)) = text.rsplit_once(':') else {
        return HandlerOutcome::drop();
    };
    let seq: usize = seq.parse().unwrap_or(usize::MAX);
    let first = cx
        .headers()
        .get_str(RECEIVE_COUNT_HEADER)
        .is_none_or(|count| count == "1");
    tokio::time::sleep(Duration::from_micros(fastrand::u64(0..3_000))).await;
    let ack = !(first && seq % 4 == 1);
    record(group.to_owned(), (seq, start, Instant::now(), ack));
    if ack {
        HandlerOutcome::ack()
    } else {
        HandlerOutcome::retry()
    }
}

const GROUPS: usize = 8;
const EACH: usize = 12;

async fn keeps_order(test: &str, keyed: bool) {
    let client = support::client().await;
    let name = format!("{}.fifo", support::unique(test));
    let url = support::create_fifo_queue(&client, &name, 30).await;
    let mut messages = Vec::new();
    for seq in 0..EACH {
        for group in 0..GROUPS {
            let group = format!("{test}:g{group}");
            messages.push((group.clone(), format!("{group}:{seq}")));
        }
    }
    support::send_grouped(&client, &url, &messages).await;

    let workers = NonZeroUsize::new(16).expect("non-zero");
    let broker = SqsBroker::from_config(support::sdk_config().await);
    let queue = name.clone();
    let poll = Duration::from_secs(1);
    let app = RustStream::new(AppInfo::new("fifo-order", "0")).with_broker(broker, move |b| {
        if keyed {
            b.include(handle.name(queue).workers_by_key(workers).wait(poll));
        } else {
            b.include(handle.name(queue).workers(workers).wait(poll));
        }
    });
    let running = app.start().await.expect("the service starts");
    support::eventually(Duration::from_secs(90), "every message acked", || {
        runs_of(test)
            .values()
            .map(|runs| runs.iter().filter(|run| run.3).count())
            .sum::<usize>()
            >= GROUPS * EACH
    })
    .await;
    tokio::time::timeout(Duration::from_secs(30), running.shutdown())
        .await
        .expect("shuts down in time")
        .expect("shuts down");

    let runs = runs_of(test);
    assert_eq!(runs.len(), GROUPS);
    for (group, mut runs) in runs {
        runs.sort_by_key(|run| run.1);
        let acked: Vec<usize> = runs.iter().filter(|run| run.3).map(|run| run.0).collect();
        assert_eq!(
            acked,
            (0..EACH).collect::<Vec<_>>(),
            "{group}: acked once each, in send order"
        );
        for pair in runs.windows(2) {
            assert!(
                pair[1].1 >= pair[0].2,
                "{group}: {} started while {} was running",
                pair[1].0,
                pair[0].0
            );
        }
    }
    assert_eq!(support::counts(&client, &url).await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unkeyed_workers_keep_each_group_in_order() {
    keeps_order("rs-fifo-workers", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_workers_keep_each_group_in_order() {
    keeps_order("rs-fifo-by-key", true).await;
}
