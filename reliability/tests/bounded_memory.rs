//! Scenario 8: bounded memory under a deep backlog.
//!
//! 100,000 messages wait on the queue; a `ledger-consumer` with slow handlers (200 ms, 16
//! workers, prefetch 20) runs for 20 s. The messages it holds (`Stats::in_flight`, sampled
//! every millisecond by the consumer) must never exceed its `max_held` (set to `workers +
//! prefetch` by the harness), however much is queued. Then SIGTERM: what it processed is gone, the rest is still on the queue. The
//! table reports the consumer's peak RSS.

use std::time::{Duration, Instant};

use sqs_engine_reliability::harness::{ConsumerArgs, ConsumerProcess, FilledQueue};
use sqs_engine_reliability::memory::mib;
use sqs_engine_reliability::report::{self, Row};
use sqs_engine_test_support as sqs;
use sqs_engine_test_support::ledger::{self, Tally};

const BINARY: &str = env!("CARGO_BIN_EXE_ledger-consumer");
const MESSAGES: usize = 100_000;
const WORKERS: usize = 16;
const PREFETCH: usize = 20;
const RUN: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_held_never_exceed_workers_plus_prefetch() -> anyhow::Result<()> {
    let fill_started = Instant::now();
    let queue = FilledQueue::new("rel-memory", MESSAGES, 16).await;
    let fill = fill_started.elapsed();
    let (client, url, sent) = (&queue.client, &queue.url, &queue.sent);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let args = ConsumerArgs {
        workers: WORKERS,
        prefetch: PREFETCH,
        handler_ms: 200,
        ..queue.consumer(dir, "run")
    };
    let mut consumer = ConsumerProcess::spawn(BINARY.as_ref(), &args)?;
    consumer.wait_for(
        Duration::from_secs(30),
        "the first message processed",
        |s| s.processed > 0,
    )?;
    let running = Instant::now();
    tokio::time::sleep(RUN).await;
    consumer.sigterm()?;
    let (exit, _) = consumer.wait_exit(Duration::from_secs(30))?;
    let run = running.elapsed();
    let last = consumer
        .final_status()
        .ok_or_else(|| anyhow::anyhow!("the consumer printed no final status"))?;
    let statuses = consumer.statuses();
    let peak_held = consumer.peak_in_flight();
    let peak_sampled_line = statuses.iter().map(|s| s.in_flight).max().unwrap_or(0);
    let peak_rss = consumer.peak_rss_kib();
    let rss_first = statuses.first().map_or(0, |s| s.rss_kib);

    let processed = ledger::read(&args.ledger)?;
    let tally = Tally::of(sent, &processed);
    let (visible, invisible) = sqs::counts(client, url).await;
    let left = visible + invisible;
    // Lost: sent, not processed, and no longer on the queue.
    let lost = (MESSAGES as u64)
        .saturating_sub(tally.processed as u64)
        .saturating_sub(left);
    report::print(&[Row {
        scenario: "8. bounded memory".into(),
        messages: MESSAGES,
        processed: tally.processed,
        lost: lost as usize,
        duplicates: tally.duplicates,
        recovery: None,
        calls_retried: last.calls_failed,
        notes: format!(
            "filled in {:.1} s; ran {:.1} s with 200 ms handlers: peak held {peak_held} \
             (status lines: {peak_sampled_line}; bound workers + prefetch = {}), {} status \
             lines; RSS {:.1} MiB at start, peak {:.1} MiB; left on queue {left}",
            fill.as_secs_f64(),
            run.as_secs_f64(),
            WORKERS + PREFETCH,
            statuses.len(),
            mib(rss_first),
            mib(peak_rss),
        ),
    }]);
    sqs::delete_queue(client, url).await;

    anyhow::ensure!(exit.success(), "the consumer exited with {exit}");
    anyhow::ensure!(
        peak_held <= (WORKERS + PREFETCH) as u64,
        "the consumer held {peak_held} messages at once, past workers + prefetch = {}",
        WORKERS + PREFETCH
    );
    anyhow::ensure!(tally.processed > 0, "nothing was processed");
    tally.ensure_exactly_once(lost)?;
    anyhow::ensure!(
        left == (MESSAGES - tally.processed) as u64,
        "the queue holds {left} messages, expected the {} not processed",
        MESSAGES - tally.processed
    );
    Ok(())
}
