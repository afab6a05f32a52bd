//! Scenario 1: SIGTERM with settlements pending.
//!
//! A `ledger-consumer` gets SIGTERM halfway through 2,000 messages (5 ms handlers, visibility
//! 30 s). It must exit within its shutdown timeout, having deleted every message it processed
//! and returned the rest: the queue then holds exactly the messages not processed, visible at
//! once (the engine returns what it had not started with visibility 0). A second consumer
//! finishes them; no message is processed twice and none is lost.

use std::time::{Duration, Instant};

use sqs_engine_reliability::harness::{ConsumerArgs, ConsumerProcess, FilledQueue};
use sqs_engine_reliability::report::{self, Row};
use sqs_engine_test_support as sqs;
use sqs_engine_test_support::ledger::{self, Tally};

const BINARY: &str = env!("CARGO_BIN_EXE_ledger-consumer");
const MESSAGES: usize = 2_000;
const SHUTDOWN_TIMEOUT_SECS: u64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_halfway_deletes_what_was_processed_and_returns_the_rest() -> anyhow::Result<()> {
    let queue = FilledQueue::new("rel-sigterm", MESSAGES, 8).await;
    let (client, url, sent) = (&queue.client, &queue.url, &queue.sent);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let args = ConsumerArgs {
        shutdown_timeout_secs: SHUTDOWN_TIMEOUT_SECS,
        ..queue.consumer(dir, "first")
    };

    // The first consumer, stopped halfway.
    let mut first = ConsumerProcess::spawn(BINARY.as_ref(), &args)?;
    let at_signal = first.wait_for(
        Duration::from_secs(60),
        "half the messages processed",
        |s| s.processed >= (MESSAGES / 2) as u64,
    )?;
    first.sigterm()?;
    let signalled = Instant::now();
    let (exit, exited) = first.wait_exit(Duration::from_secs(SHUTDOWN_TIMEOUT_SECS + 20))?;
    let shutdown = exited.duration_since(signalled);
    anyhow::ensure!(exit.success(), "the first consumer exited with {exit}");
    let last = first
        .final_status()
        .ok_or_else(|| anyhow::anyhow!("the first consumer printed no final status"))?;
    let first_ledger = ledger::read(&args.ledger)?;
    let first_tally = Tally::of(sent, &first_ledger);

    // What is left on the queue: exactly what was not processed, and visible at once or soon.
    let (visible, invisible) = sqs::counts(client, url).await;
    let expected_left = (MESSAGES - first_tally.processed) as u64;
    let left_at_exit = visible + invisible;
    let mut all_visible_after = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let (visible, invisible) = sqs::counts(client, url).await;
        if invisible == 0 && visible == expected_left {
            all_visible_after = Some(exited.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A second consumer finishes the work.
    let second = queue
        .finish_with_second(
            BINARY.as_ref(),
            dir,
            &args,
            Duration::from_secs(SHUTDOWN_TIMEOUT_SECS + 20),
        )
        .await?;
    let recovery = second.done.duration_since(signalled);
    let (finished, second_exit, second_last) = (second.finished, second.exit, second.last);

    let mut all = first_ledger;
    ledger::merge(&mut all, &ledger::read(&second.ledger)?);
    let tally = Tally::of(sent, &all);
    let (visible_end, invisible_end) = sqs::counts(client, url).await;
    let lost = tally.unprocessed;
    let calls_retried = last.calls_failed + second_last.as_ref().map_or(0, |s| s.calls_failed);
    report::print(&[Row {
        scenario: "1. SIGTERM, acks pending".into(),
        messages: MESSAGES,
        processed: tally.processed,
        lost,
        duplicates: tally.duplicates,
        recovery: Some(recovery),
        calls_retried,
        notes: format!(
            "first consumer: {} processed, SIGTERM with {} held and {} settlements pending, \
             exit {:.2} s after it (engine shutdown {} ms, timeout {SHUTDOWN_TIMEOUT_SECS} s), \
             {} unsettled; left on queue {left_at_exit} (expected {expected_left}), all visible \
             {} after exit",
            first_tally.processed,
            at_signal.in_flight,
            at_signal.settlements_pending,
            shutdown.as_secs_f64(),
            last.shutdown_ms.unwrap_or(0),
            last.unsettled,
            all_visible_after.map_or_else(
                || "never (10 s)".to_owned(),
                |d| format!("{} ms", d.as_millis())
            ),
        ),
    }]);
    sqs::delete_queue(client, url).await;

    finished?;
    anyhow::ensure!(
        shutdown < Duration::from_secs(SHUTDOWN_TIMEOUT_SECS),
        "the consumer took {shutdown:?} to exit after SIGTERM, past its shutdown timeout"
    );
    anyhow::ensure!(
        last.unsettled == 0,
        "{} deliveries dropped unsettled",
        last.unsettled
    );
    anyhow::ensure!(
        first_tally.duplicates == 0,
        "the first consumer processed messages twice"
    );
    anyhow::ensure!(
        left_at_exit == expected_left,
        "after the first consumer exited the queue held {left_at_exit} messages (visible \
         {visible}, in flight {invisible}), expected the {expected_left} not processed"
    );
    anyhow::ensure!(
        all_visible_after.is_some(),
        "the messages not processed did not all become visible within 10 s of the exit"
    );
    anyhow::ensure!(
        second_exit.success(),
        "the second consumer exited with {second_exit}"
    );
    tally.ensure_exactly_once(lost as u64)?;
    anyhow::ensure!(
        tally.strangers == 0,
        "{} unknown ids in the ledgers",
        tally.strangers
    );
    anyhow::ensure!(
        (visible_end, invisible_end) == (0, 0),
        "the queue still holds ({visible_end}, {invisible_end}) messages"
    );
    Ok(())
}
