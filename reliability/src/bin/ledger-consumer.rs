//! `ledger-consumer`: consumes one queue with sqs-engine and appends each processed message id
//! to a ledger file, one line per processing, written before the handler returns its outcome.
//!
//! SIGTERM or SIGINT starts the engine's graceful shutdown. Every 100 ms a JSON status line goes
//! to stdout (messages held, received, acked, RSS: see `sqs_engine_reliability::status`), and a
//! final one with `"kind":"final"` once the engine has stopped. Logs (warnings and up, or
//! `RUST_LOG`) go to stderr.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use sqs_engine::{Engine, Message, Outcome, Stats, StatsHandle};
use sqs_engine_reliability::memory;
use sqs_engine_reliability::status::{Kind, Status, sample_peak_in_flight};
use sqs_engine_test_support as sqs;
use sqs_engine_test_support::ledger::LedgerFile;
use tokio::signal::unix::{SignalKind, signal};

/// Consumes a queue, recording every processed message id in a ledger file.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The SQS endpoint (LocalStack); credentials test/test, region us-east-1.
    #[arg(long, default_value = sqs::DEFAULT_ENDPOINT)]
    endpoint: String,
    /// The queue, by name or URL.
    #[arg(long)]
    queue: String,
    /// The ledger file: one processed message id per line, appended.
    #[arg(long)]
    ledger: PathBuf,
    /// Handler invocations at once.
    #[arg(long, default_value_t = 16)]
    workers: usize,
    /// Long-poll loops.
    #[arg(long, default_value_t = 4)]
    receivers: usize,
    /// Messages received ahead of a free worker (default: the engine's, a batch per receiver).
    #[arg(long)]
    prefetch: Option<usize>,
    /// The most messages held at once (default: the engine's).
    #[arg(long)]
    max_held: Option<usize>,
    /// How long each handler works (sleeps) before it writes the ledger and acks.
    #[arg(long, default_value_t = 0)]
    handler_ms: u64,
    /// The visibility timeout asked for at each receive, seconds.
    #[arg(long, default_value_t = 30)]
    visibility_secs: u64,
    /// How long shutdown waits for running handlers, seconds.
    #[arg(long, default_value_t = 10)]
    shutdown_timeout_secs: u64,
    /// The long-poll wait, seconds (0..=20).
    #[arg(long, default_value_t = 1)]
    wait_secs: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    sqs_engine_reliability::log_to_stderr();
    let args = Args::parse();
    let started = Instant::now();

    let ledger = Arc::new(
        LedgerFile::open(&args.ledger)
            .with_context(|| format!("opening the ledger {}", args.ledger.display()))?,
    );
    let config = sqs::sdk_config_at(&args.endpoint).await;
    let mut builder = Engine::builder()
        .sdk_config(&config)
        .queue(args.queue.clone())
        .workers(args.workers)
        .receivers(args.receivers)
        .visibility_timeout(Duration::from_secs(args.visibility_secs))
        .shutdown_timeout(Duration::from_secs(args.shutdown_timeout_secs))
        .wait_time(Duration::from_secs(args.wait_secs));
    if let Some(prefetch) = args.prefetch {
        builder = builder.prefetch(prefetch);
    }
    if let Some(max_held) = args.max_held {
        builder = builder.max_held(max_held);
    }
    let engine = builder.build().context("configuring the engine")?;
    let stats = engine.stats();

    // The shutdown signal, and when it came.
    let signalled = Arc::new(std::sync::OnceLock::<Instant>::new());
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let shutdown = {
        let signalled = Arc::clone(&signalled);
        async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            let _ = signalled.set(Instant::now());
        }
    };

    // The peak of messages held, sampled every millisecond, and the status lines.
    let (peak, sampler) = sample_peak_in_flight(&stats);
    let printer = {
        let (stats, peak, ledger) = (stats.clone(), Arc::clone(&peak), Arc::clone(&ledger));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let line = status(Kind::Status, started, &stats, &peak, &ledger, None);
                println!("{}", line.to_line());
            }
        })
    };

    let handler = {
        let ledger = Arc::clone(&ledger);
        let work = Duration::from_millis(args.handler_ms);
        move |message: Message| {
            let ledger = Arc::clone(&ledger);
            async move {
                if !work.is_zero() {
                    tokio::time::sleep(work).await;
                }
                match ledger.append(message.id()) {
                    Ok(()) => Outcome::Ack,
                    Err(e) => {
                        // Not recorded, so not processed: let it come back.
                        eprintln!("ledger write failed for {}: {e}", message.id());
                        Outcome::Retry
                    }
                }
            }
        }
    };
    let result = engine.run(handler, shutdown).await;
    let stopped = Instant::now();
    sampler.abort();
    printer.abort();
    let _ = printer.await;
    let shutdown_ms = signalled
        .get()
        .map(|at| u64::try_from(stopped.duration_since(*at).as_millis()).unwrap_or(u64::MAX));
    let result = result.context("the engine")?;
    peak.fetch_max(result.in_flight, Ordering::Relaxed);
    let line = status(Kind::Final, started, &stats, &peak, &ledger, shutdown_ms);
    println!("{}", line.to_line());
    Ok(())
}

/// A status line from the engine's counters, the ledger and `/proc`.
fn status(
    kind: Kind,
    started: Instant,
    stats: &StatsHandle,
    peak: &AtomicU64,
    ledger: &LedgerFile,
    shutdown_ms: Option<u64>,
) -> Status {
    // The ledger first: every ack answered was processed before, so pending is never negative.
    let processed = ledger.lines();
    let s: Stats = stats.snapshot();
    let memory = memory::own();
    let calls_failed = [
        s.receive_message,
        s.delete_message_batch,
        s.change_message_visibility_batch,
        s.get_queue_url,
        s.get_queue_attributes,
        s.set_queue_attributes,
        s.create_queue,
    ]
    .iter()
    .map(|c| c.failed)
    .sum();
    Status {
        kind,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        in_flight: s.in_flight,
        peak_in_flight: peak.load(Ordering::Relaxed).max(s.in_flight),
        messages_received: s.messages_received,
        acked: s.acked.ok,
        ack_failed: s.acked.failed,
        processed,
        settlements_pending: processed.saturating_sub(s.acked.total()),
        calls_failed,
        calls: s.total_calls(),
        unsettled: s.unsettled,
        rss_kib: memory.rss_kib,
        peak_rss_kib: memory.peak_rss_kib,
        shutdown_ms,
    }
}
