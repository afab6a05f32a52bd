//! `loadtest consume`: consumes a queue with the sqs-engine engine, acking every message,
//! until a number of messages have been handled, and reports from the engine's own counters.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::builder::RangedU64ValueParser;
use sqs_engine::{Engine, Message, Outcome};
use tokio::sync::oneshot;
use tokio::time::{Instant, interval_at, sleep, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::report::{self, ConsumeReport, ConsumeSetup, StopReason, Timing};
use crate::target::TargetArgs;

/// How long the engine's graceful shutdown may take before the run abandons it. Longer than
/// the engine's own shutdown timeout for handlers (30 s by default), so that a shutdown that
/// works always finishes.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(60);

/// How often progress is logged (at `info`).
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Options of `loadtest consume`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ConsumeArgs {
    /// Where SQS is.
    #[command(flatten)]
    target: TargetArgs,

    /// The queue, by name or URL.
    #[arg(long)]
    queue: String,

    /// Stop once the handler has seen this many messages.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    messages: u64,

    /// Handler invocations at once (the engine's workers setting).
    #[arg(long, default_value_t = 64)]
    workers: usize,

    /// Long-poll receivers (the engine's receivers setting).
    #[arg(long, default_value_t = 4)]
    receivers: usize,

    /// Sleep this long in the handler before acking each message, in milliseconds.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    handler_delay_ms: u64,

    /// Give up after this many seconds: shut down, report what was done, exit non-zero.
    #[arg(long, default_value_t = 600, value_name = "SECS", value_parser = RangedU64ValueParser::<u64>::new().range(1..))]
    timeout_secs: u64,

    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

/// What the handler invocations of one run share: how many messages they have seen, and the
/// signal that the target is reached.
#[derive(Debug)]
struct Progress {
    /// Handler invocations that finished.
    handled: AtomicU64,
    /// Invocations to reach before stopping.
    target: u64,
    /// Cancelled when `handled` reaches `target`.
    done: CancellationToken,
}

impl Progress {
    /// Counts one finished handler invocation, and signals the end at the target.
    fn handled_one(&self) {
        if self.handled.fetch_add(1, Ordering::Relaxed) + 1 >= self.target {
            self.done.cancel();
        }
    }
}

/// Runs `loadtest consume`: prints the report and, with `--json`, writes it.
///
/// # Errors
///
/// When the engine cannot be configured or cannot open the queue; and, after the report,
/// when the run timed out or was interrupted, when its shutdown did not finish, or when fewer
/// messages than asked for were acked.
pub(crate) async fn run(args: ConsumeArgs) -> Result<()> {
    let config = args.target.sdk_config().await;
    let engine = Engine::builder()
        .sdk_config(&config)
        .queue(args.queue.clone())
        .workers(args.workers)
        .receivers(args.receivers)
        .build()
        .context("configuring the engine")?;
    let stats = engine.stats();

    let progress = Arc::new(Progress {
        handled: AtomicU64::new(0),
        target: args.messages,
        done: CancellationToken::new(),
    });
    let handler = {
        let progress = Arc::clone(&progress);
        let delay = Duration::from_millis(args.handler_delay_ms);
        move |_message: Message| {
            let progress = Arc::clone(&progress);
            async move {
                if !delay.is_zero() {
                    sleep(delay).await;
                }
                progress.handled_one();
                Outcome::Ack
            }
        }
    };

    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.timeout_secs);
    // The shutdown future tells why and when it fired, and cancels `stopping`.
    let (stopped_tx, mut stopped_rx) = oneshot::channel::<(StopReason, Instant)>();
    let stopping = CancellationToken::new();
    let shutdown = {
        let done = progress.done.clone();
        let stopping = stopping.clone();
        async move {
            let reason = tokio::select! {
                () = done.cancelled() => StopReason::Completed,
                () = sleep_until(deadline) => StopReason::TimedOut,
                () = interrupted() => StopReason::Interrupted,
            };
            info!(%reason, "stopping the engine");
            let _ = stopped_tx.send((reason, Instant::now()));
            stopping.cancel();
        }
    };

    // The engine polls `shutdown` only once the queue is open; `abandon` also covers a start
    // that never finishes, and a graceful shutdown that does not.
    let abandon = async {
        tokio::select! {
            () = stopping.cancelled() => {}
            () = sleep_until(deadline) => {}
        }
        sleep(SHUTDOWN_GRACE).await;
    };
    let run = engine.run(handler, shutdown);
    tokio::pin!(run, abandon);
    let mut tick = interval_at(start + PROGRESS_EVERY, PROGRESS_EVERY);
    let finished = loop {
        tokio::select! {
            result = &mut run => break Some(result),
            () = &mut abandon => break None,
            _ = tick.tick() => {
                let now = stats.snapshot();
                info!(
                    received = now.messages_received,
                    handled = progress.handled.load(Ordering::Relaxed),
                    acked = now.acked.ok,
                    calls = now.total_calls(),
                    "progress"
                );
            }
        }
    };
    let end = Instant::now();

    let (final_stats, shutdown_complete) = match finished {
        Some(Ok(final_stats)) => (final_stats, true),
        Some(Err(error)) => {
            return Err(error).with_context(|| format!("consuming `{}`", args.queue));
        }
        None => (stats.snapshot(), false),
    };
    let (stop_reason, stopped_at) = match stopped_rx.try_recv() {
        Ok(stopped) => stopped,
        // The engine returned on its own, or never polled the shutdown future before the
        // deadline.
        Err(_) if shutdown_complete => (StopReason::EngineStopped, end),
        Err(_) => (StopReason::TimedOut, deadline),
    };
    let handled = progress.handled.load(Ordering::Relaxed);
    let report = ConsumeReport::new(
        ConsumeSetup {
            queue: args.queue.clone(),
            endpoint: args.target.endpoint.clone(),
            workers: args.workers,
            receivers: args.receivers,
            handler_delay_ms: args.handler_delay_ms,
            messages_target: args.messages,
            timeout_secs: args.timeout_secs,
        },
        stop_reason,
        shutdown_complete,
        handled,
        &final_stats,
        Timing {
            elapsed_secs: (end - start).as_secs_f64(),
            shutdown_secs: end.saturating_duration_since(stopped_at).as_secs_f64(),
        },
    );
    print!("{report}");
    if let Some(path) = &args.json {
        report::write_json(path, &report)?;
    }

    let acked = final_stats.acked.ok;
    if stop_reason != StopReason::Completed {
        bail!(
            "stopped ({stop_reason}) with {acked} of {} messages acked",
            args.messages
        );
    }
    if !shutdown_complete {
        bail!(
            "the engine's shutdown did not finish within {} s",
            SHUTDOWN_GRACE.as_secs()
        );
    }
    if acked < args.messages {
        bail!(
            "{handled} messages were handled but only {acked} of {} acked",
            args.messages
        );
    }
    Ok(())
}

/// Completes on Ctrl-C; never, when the signal cannot be listened for.
async fn interrupted() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}
