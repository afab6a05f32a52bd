//! Scenario 2: `kill -9` mid-run.
//!
//! A `ledger-consumer` is killed (SIGKILL) halfway through 2,000 messages (5 ms handlers,
//! visibility 3 s). A second consumer then finishes the work once the visibility of what the
//! first one held lapses. Nothing may be lost; a message is processed twice only if the first
//! consumer had processed it and not yet deleted it when it died.
//!
//! The bound on duplicates: the messages the engine held at the kill (at most `workers +
//! prefetch`) plus the acks it had queued and SQS had not answered yet (a settled message
//! leaves the engine's count of held messages when its outcome is queued, before its
//! `DeleteMessageBatch` goes out). The last status line before the kill gives both.

use std::time::{Duration, Instant};

use sqs_engine_reliability::harness::{ConsumerArgs, ConsumerProcess, FilledQueue};
use sqs_engine_reliability::report::{self, Row};
use sqs_engine_test_support as sqs;
use sqs_engine_test_support::ledger::{self, Tally};

const BINARY: &str = env!("CARGO_BIN_EXE_ledger-consumer");
const MESSAGES: usize = 2_000;
const VISIBILITY_SECS: u64 = 3;
const WORKERS: usize = 16;
const PREFETCH: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_midrun_loses_nothing_and_duplicates_only_what_was_held() -> anyhow::Result<()> {
    let queue = FilledQueue::new("rel-kill9", MESSAGES, 8).await;
    let (client, url, sent) = (&queue.client, &queue.url, &queue.sent);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let args = ConsumerArgs {
        workers: WORKERS,
        prefetch: PREFETCH,
        visibility_secs: VISIBILITY_SECS,
        ..queue.consumer(dir, "first")
    };

    let mut first = ConsumerProcess::spawn(BINARY.as_ref(), &args)?;
    first.wait_for(
        Duration::from_secs(60),
        "half the messages processed",
        |s| s.processed >= (MESSAGES / 2) as u64,
    )?;
    // Kill right after a fresh status line, so that it describes the moment of the kill.
    let seen = first.latest().map_or(0, |s| s.elapsed_ms);
    let before_kill = first.wait_for(Duration::from_secs(5), "a fresh status line", |s| {
        s.elapsed_ms > seen
    })?;
    first.kill9()?;
    let killed = Instant::now();
    let first_ledger = ledger::read(&args.ledger)?;
    let first_tally = Tally::of(sent, &first_ledger);
    let (visible, invisible) = sqs::counts(client, url).await;

    let second = queue
        .finish_with_second(BINARY.as_ref(), dir, &args, Duration::from_secs(30))
        .await?;
    let recovery = second.done.duration_since(killed);
    let (finished, second_exit, second_last) = (second.finished, second.exit, second.last);

    let mut all = first_ledger;
    ledger::merge(&mut all, &ledger::read(&second.ledger)?);
    let tally = Tally::of(sent, &all);
    let held_bound = (WORKERS + PREFETCH) as u64;
    let observed_bound = before_kill.in_flight + before_kill.settlements_pending;
    let calls_retried =
        before_kill.calls_failed + second_last.as_ref().map_or(0, |s| s.calls_failed);
    report::print(&[Row {
        scenario: "2. kill -9 mid-run".into(),
        messages: MESSAGES,
        processed: tally.processed,
        lost: tally.unprocessed,
        duplicates: tally.duplicates,
        recovery: Some(recovery),
        calls_retried,
        notes: format!(
            "first consumer: {} processed; last status ~{} ms before the kill: {} held \
             (bound workers + prefetch = {held_bound}), {} acks unanswered; queue after the \
             kill: {visible} visible, {invisible} in flight; visibility {VISIBILITY_SECS} s",
            first_tally.processed,
            (killed.duration_since(first.started).as_millis() as u64)
                .saturating_sub(before_kill.elapsed_ms),
            before_kill.in_flight,
            before_kill.settlements_pending,
        ),
    }]);
    sqs::delete_queue(client, url).await;

    finished?;
    anyhow::ensure!(
        second_exit.success(),
        "the second consumer exited with {second_exit}"
    );
    anyhow::ensure!(
        tally.unprocessed == 0,
        "{} messages lost",
        tally.unprocessed
    );
    anyhow::ensure!(
        tally.strangers == 0,
        "{} unknown ids in the ledgers",
        tally.strangers
    );
    anyhow::ensure!(
        before_kill.peak_in_flight <= held_bound,
        "the first consumer held {} messages at once, past workers + prefetch = {held_bound}",
        before_kill.peak_in_flight
    );
    anyhow::ensure!(
        tally.duplicates <= held_bound.max(observed_bound),
        "{} duplicates, more than the messages held or unanswered at the kill ({} + {}) and \
         more than workers + prefetch ({held_bound})",
        tally.duplicates,
        before_kill.in_flight,
        before_kill.settlements_pending
    );
    Ok(())
}
