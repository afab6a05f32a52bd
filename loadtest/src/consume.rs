//! `loadtest consume`: consumes a queue with the sqs-engine engine until a number of messages
//! are finished (acked or dropped), and reports from the engine's own counters.
//!
//! The handler acks by default; `--retry-after-share`, `--drop-share` and `--slow-share`
//! give a deterministic share of the messages another outcome or a longer wait (see
//! [`crate::behaviour`]). `--metrics-addr` serves the engine's Prometheus metrics while it
//! runs, and `--linger-secs` keeps them up after the report.

use std::net::SocketAddr;
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

use crate::behaviour::{self, Behaviour, Verdict};
use crate::progress::LOG_EVERY;
use crate::report::{self, ConsumeReport, ConsumeSetup, StopReason, Timing};
use crate::target::QueueTarget;

/// How long the engine's graceful shutdown may take before the run abandons it. Longer than
/// the engine's own shutdown timeout for handlers (30 s by default), so that a shutdown that
/// works always finishes.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(60);

/// Options of `loadtest consume`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ConsumeArgs {
    /// Where SQS is, and the queue.
    #[command(flatten)]
    on: QueueTarget,

    /// Stop once this many messages are finished (the handler acked or dropped them; a
    /// retry_after does not finish a message).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    messages: u64,

    /// Handler invocations at once (the engine's workers setting).
    #[arg(long, default_value_t = 64)]
    workers: usize,

    /// The most long-poll receivers (the engine's receivers setting; it runs as many as keep
    /// up). Without it, the engine's default.
    #[arg(long)]
    receivers: Option<usize>,

    /// Sleep this long in the handler before each outcome, in milliseconds.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    handler_delay_ms: u64,

    /// Share (0..=1) of first deliveries answered with retry_after; the redelivery is acked.
    #[arg(long, default_value_t = 0.0, value_name = "F", value_parser = behaviour::parse_share)]
    retry_after_share: f64,

    /// The delay of a retry_after, in seconds.
    #[arg(long, default_value_t = 1, value_name = "S")]
    retry_after_secs: u64,

    /// Share (0..=1) of messages dropped instead of acked.
    #[arg(long, default_value_t = 0.0, value_name = "F", value_parser = behaviour::parse_share)]
    drop_share: f64,

    /// Share (0..=1) of messages that sleep `--slow-ms` more before their outcome.
    #[arg(long, default_value_t = 0.0, value_name = "F", value_parser = behaviour::parse_share)]
    slow_share: f64,

    /// The extra sleep of a slow message, in milliseconds.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    slow_ms: u64,

    /// The visibility timeout the engine asks for at each receive, in seconds. Default: the
    /// queue's own.
    #[arg(long, value_name = "S")]
    visibility_secs: Option<u64>,

    /// The engine's max_attempts (the redrive policy's maxReceiveCount); needs
    /// `--dead-letter`.
    #[arg(long, value_name = "N", requires = "dead_letter")]
    max_attempts: Option<u32>,

    /// The dead-letter queue of the redrive policy, created when missing; needs
    /// `--max-attempts`.
    #[arg(long, value_name = "QUEUE", requires = "max_attempts")]
    dead_letter: Option<String>,

    /// Serve the engine's Prometheus metrics on /metrics at this address while it runs.
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<SocketAddr>,

    /// After the run and its report, stay alive this many seconds (metrics still served).
    #[arg(long, default_value_t = 0, value_name = "S")]
    linger_secs: u64,

    /// Give up after this many seconds: shut down, report what was done, exit non-zero.
    #[arg(long, default_value_t = 600, value_name = "SECS", value_parser = RangedU64ValueParser::<u64>::new().range(1..))]
    timeout_secs: u64,

    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

impl ConsumeArgs {
    /// What the handler does with each message.
    fn behaviour(&self) -> Behaviour {
        Behaviour {
            delay: Duration::from_millis(self.handler_delay_ms),
            retry_after_share: self.retry_after_share,
            retry_after: Duration::from_secs(self.retry_after_secs),
            drop_share: self.drop_share,
            slow_share: self.slow_share,
            slow: Duration::from_millis(self.slow_ms),
        }
    }
}

/// What the handler invocations of one run share: how many messages they have handled and
/// finished, and the signal that the target is reached.
#[derive(Debug)]
struct Progress {
    /// Handler invocations that returned.
    handled: AtomicU64,
    /// Handler invocations that finished their message (ack or drop).
    finished: AtomicU64,
    /// Messages to finish before stopping.
    target: u64,
    /// Cancelled when `finished` reaches `target`.
    done: CancellationToken,
}

impl Progress {
    /// Counts one returned handler invocation, and signals the end when the target number
    /// of messages is finished.
    fn handled_one(&self, verdict: Verdict) {
        self.handled.fetch_add(1, Ordering::Relaxed);
        if verdict.is_final() && self.finished.fetch_add(1, Ordering::Relaxed) + 1 >= self.target {
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
/// messages than asked for were acked or dropped.
pub(crate) async fn run(args: ConsumeArgs) -> Result<()> {
    if let Some(addr) = args.metrics_addr {
        sqs_engine::prometheus::install(Some(addr))
            .with_context(|| format!("serving Prometheus metrics on {addr}"))?;
        info!(%addr, "Prometheus metrics on /metrics");
    }
    let result = consume(&args).await;
    if args.linger_secs > 0 {
        info!(secs = args.linger_secs, "lingering");
        sleep(Duration::from_secs(args.linger_secs)).await;
    }
    result
}

/// The run itself: everything [`run`] does but the metrics endpoint and the linger.
async fn consume(args: &ConsumeArgs) -> Result<()> {
    let config = args.on.target.sdk_config().await;
    let mut builder = Engine::builder()
        .sdk_config(&config)
        .queue(args.on.queue.clone())
        .workers(args.workers);
    if let Some(receivers) = args.receivers {
        builder = builder.receivers(receivers);
    }
    if let Some(secs) = args.visibility_secs {
        builder = builder.visibility_timeout(Duration::from_secs(secs));
    }
    if let (Some(max_attempts), Some(dead_letter)) = (args.max_attempts, &args.dead_letter) {
        builder = builder
            .max_attempts(max_attempts)
            .dead_letter(dead_letter.clone())
            .create_if_missing(true);
    }
    let engine = builder.build().context("configuring the engine")?;
    let stats = engine.stats();

    let progress = Arc::new(Progress {
        handled: AtomicU64::new(0),
        finished: AtomicU64::new(0),
        target: args.messages,
        done: CancellationToken::new(),
    });
    let behaviour = args.behaviour();
    let handler = {
        let progress = Arc::clone(&progress);
        move |message: Message| {
            let progress = Arc::clone(&progress);
            let (key, _) = behaviour::parse_body(message.body());
            let decision = behaviour.decide(key, message.receive_count());
            async move {
                if !decision.wait.is_zero() {
                    sleep(decision.wait).await;
                }
                progress.handled_one(decision.verdict);
                match decision.verdict {
                    Verdict::Ack => Outcome::Ack,
                    Verdict::Drop => Outcome::Drop,
                    Verdict::RetryAfter(delay) => Outcome::RetryAfter(delay),
                }
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
    let mut tick = interval_at(start + LOG_EVERY, LOG_EVERY);
    let bar = crate::progress::bar(progress.target, "consume");
    let mut redraw = interval_at(start, crate::progress::REDRAW_EVERY);
    let finished = loop {
        tokio::select! {
            result = &mut run => break Some(result),
            () = &mut abandon => break None,
            _ = tick.tick() => {
                let now = stats.snapshot();
                info!(
                    received = now.messages_received,
                    handled = progress.handled.load(Ordering::Relaxed),
                    finished = progress.finished.load(Ordering::Relaxed),
                    acked = now.acked.ok,
                    dropped = now.dropped.ok,
                    calls = now.total_calls(),
                    "progress"
                );
            }
            _ = redraw.tick() => bar.set_position(progress.finished.load(Ordering::Relaxed)),
        }
    };
    bar.finish_and_clear();
    let end = Instant::now();

    let (final_stats, shutdown_complete) = match finished {
        Some(Ok(final_stats)) => (final_stats, true),
        Some(Err(error)) => {
            return Err(error).with_context(|| format!("consuming `{}`", args.on.queue));
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
            queue: args.on.queue.clone(),
            endpoint: args.on.target.endpoint.clone(),
            workers: args.workers,
            receivers: args.receivers,
            handler_delay_ms: args.handler_delay_ms,
            behaviour,
            visibility_secs: args.visibility_secs,
            max_attempts: args.max_attempts,
            dead_letter: args.dead_letter.clone(),
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

    let acked = final_stats.acked.ok + final_stats.dropped.ok;
    if stop_reason != StopReason::Completed {
        bail!(
            "stopped ({stop_reason}) with {acked} of {} messages acked or dropped",
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
            "{handled} deliveries were handled but only {acked} of {} messages acked or dropped",
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
