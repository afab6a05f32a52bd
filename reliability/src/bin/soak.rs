//! `soak`: the engine under a steady load for a long time, watching its memory.
//!
//! A filler task sends at a fixed rate (`--rate` messages a second, in `SendMessageBatch`
//! calls every 100 ms) to a fresh queue while the engine, in this same process, consumes it.
//! The process's RSS (`VmRSS`) is sampled every second. After `--duration-secs` (default ten
//! minutes) the filler stops, the engine drains the backlog and shuts down, and the run fails
//! (exit status 1) when:
//!
//! - a message sent was never processed (lost), or the backlog did not drain;
//! - memory was not flat: after the warm-up (`--warmup-secs`), the mean RSS of the last window
//!   exceeds the mean of the first window by more than the larger of `--flat-percent` of the
//!   first window's mean and `--flat-slack-mib`. A window is `--window-secs` (60 s), or a
//!   third of the measured run when that is shorter;
//! - the engine held more than its `max_held` (`workers + prefetch` here) messages at once.
//!
//! What the handlers processed is counted in a table sized up front (one byte per message
//! the filler will send), so the bookkeeping itself does not grow the heap as the run goes.
//! The summary also gives the maximum RSS and the least-squares slope after the first window.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use serde::Serialize;
use sqs_engine::{Engine, Message, Outcome};
use sqs_engine_reliability::memory::{self, mib};
use sqs_engine_reliability::status::sample_peak_in_flight;
use sqs_engine_test_support as sqs;

/// Runs the engine under a steady load and checks that its memory stays flat.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The SQS endpoint (LocalStack); credentials test/test, region us-east-1.
    #[arg(long, default_value = sqs::DEFAULT_ENDPOINT)]
    endpoint: String,
    /// How long the filler sends, seconds.
    #[arg(long, default_value_t = 600)]
    duration_secs: u64,
    /// Messages sent per second.
    #[arg(long, default_value_t = 300)]
    rate: u64,
    /// Handler invocations at once.
    #[arg(long, default_value_t = 32)]
    workers: usize,
    /// Long-poll loops.
    #[arg(long, default_value_t = 4)]
    receivers: usize,
    /// Messages received ahead of a free worker (default: the engine's).
    #[arg(long)]
    prefetch: Option<usize>,
    /// How long each handler works (sleeps) before it acks, milliseconds.
    #[arg(long, default_value_t = 5)]
    handler_ms: u64,
    /// The visibility timeout asked for at each receive, seconds.
    #[arg(long, default_value_t = 30)]
    visibility_secs: u64,
    /// The long-poll wait, seconds.
    #[arg(long, default_value_t = 20)]
    wait_secs: u64,
    /// The start of the run left out of the memory comparison, seconds.
    #[arg(long, default_value_t = 10)]
    warmup_secs: u64,
    /// The length of the first and last windows compared, seconds.
    #[arg(long, default_value_t = 60)]
    window_secs: u64,
    /// Growth allowed from the first window's mean RSS to the last's, percent.
    #[arg(long, default_value_t = 10.0)]
    flat_percent: f64,
    /// Growth always allowed, MiB (the larger of the two limits applies).
    #[arg(long, default_value_t = 4.0)]
    flat_slack_mib: f64,
    /// How long the engine may take to drain the backlog after the filler stops, seconds.
    #[arg(long, default_value_t = 60)]
    drain_secs: u64,
}

/// The run's result, printed as one JSON line at the end.
#[derive(Debug, Serialize)]
struct Summary {
    duration_secs: u64,
    rate: u64,
    sent: u64,
    send_failures: u64,
    processed: u64,
    lost: u64,
    duplicates: u64,
    drained: bool,
    peak_in_flight: u64,
    capacity: usize,
    rss_samples: usize,
    window_secs: f64,
    first_window_mean_mib: f64,
    last_window_mean_mib: f64,
    max_mib: f64,
    growth_mib: f64,
    allowed_growth_mib: f64,
    slope_kib_per_min: f64,
    flat: bool,
    passed: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    sqs_engine_reliability::log_to_stderr();
    let args = Args::parse();
    anyhow::ensure!(args.rate > 0, "--rate must be positive");
    anyhow::ensure!(
        args.warmup_secs < args.duration_secs,
        "--warmup-secs must be shorter than --duration-secs"
    );

    let client = sqs::client_at(&args.endpoint).await;
    let name = sqs::unique("soak");
    let url = sqs::create_queue(&client, &name, u32::try_from(args.visibility_secs)?).await;

    // The filler's plan: a tick every 100 ms, `per_tick` messages each.
    let ticks = args.duration_secs * 10;
    let per_tick = args.rate.div_ceil(10);
    let planned = usize::try_from(ticks * per_tick)?;
    // One counter per message, touched now so the pages are resident from the start.
    let seen: Arc<Vec<AtomicU8>> = Arc::new((0..planned).map(|_| AtomicU8::new(0)).collect());
    let processed = Arc::new(AtomicU64::new(0));

    let config = sqs::sdk_config_at(&args.endpoint).await;
    let mut builder = Engine::builder()
        .sdk_config(&config)
        .queue(url.clone())
        .workers(args.workers)
        .receivers(args.receivers)
        .visibility_timeout(Duration::from_secs(args.visibility_secs))
        .wait_time(Duration::from_secs(args.wait_secs));
    if let Some(prefetch) = args.prefetch {
        builder = builder.prefetch(prefetch);
    }
    // The soak bounds what the engine holds as the tests do: workers + prefetch.
    let capacity = args.workers + args.prefetch.unwrap_or(args.receivers * 10);
    builder = builder.max_held(capacity);
    let engine = builder.build().context("configuring the engine")?;
    let stats = engine.stats();
    let (stop_engine, stopped) = tokio::sync::oneshot::channel::<()>();
    let handler = {
        let (seen, processed) = (Arc::clone(&seen), Arc::clone(&processed));
        let work = Duration::from_millis(args.handler_ms);
        move |message: Message| {
            let (seen, processed) = (Arc::clone(&seen), Arc::clone(&processed));
            async move {
                if !work.is_zero() {
                    tokio::time::sleep(work).await;
                }
                let index = message
                    .body()
                    .strip_prefix("soak-")
                    .and_then(|n| n.parse::<usize>().ok());
                if let Some(cell) = index.and_then(|i| seen.get(i)) {
                    let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                        Some(n.saturating_add(1))
                    });
                }
                processed.fetch_add(1, Ordering::Relaxed);
                Outcome::Ack
            }
        }
    };
    let engine_task = tokio::spawn(engine.run(handler, async move {
        let _ = stopped.await;
    }));

    // RSS every second, and the peak of messages held every millisecond.
    let started = Instant::now();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = Arc::clone(&sampling);
        let capacity_hint = usize::try_from(args.duration_secs + 5)?;
        tokio::spawn(async move {
            let mut samples: Vec<(f64, u64)> = Vec::with_capacity(capacity_hint);
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            while sampling.load(Ordering::Relaxed) {
                tick.tick().await;
                samples.push((started.elapsed().as_secs_f64(), memory::own().rss_kib));
            }
            samples
        })
    };
    let (peak, peak_sampler) = sample_peak_in_flight(&stats);

    // The filler.
    let sent = Arc::new(AtomicU64::new(0));
    let send_failures = Arc::new(AtomicU64::new(0));
    let filler = {
        let (client, url) = (client.clone(), url.clone());
        let (sent, send_failures) = (Arc::clone(&sent), Arc::clone(&send_failures));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut next: u64 = 0;
            for _ in 0..ticks {
                tick.tick().await;
                let mut calls = tokio::task::JoinSet::new();
                let end = next + per_tick;
                while next < end {
                    let batch_end = (next + 10).min(end);
                    let bodies: Vec<String> =
                        (next..batch_end).map(|i| format!("soak-{i}")).collect();
                    let (client, url) = (client.clone(), url.clone());
                    calls.spawn(async move {
                        for _ in 0..5 {
                            if sqs::send_batch(&client, &url, &bodies).await.is_ok() {
                                return (bodies.len() as u64, 0);
                            }
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        (0, bodies.len() as u64)
                    });
                    next = batch_end;
                }
                while let Some(result) = calls.join_next().await {
                    let (ok, failed) = result.unwrap_or((0, 0));
                    sent.fetch_add(ok, Ordering::Relaxed);
                    send_failures.fetch_add(failed, Ordering::Relaxed);
                }
            }
        })
    };

    // Progress every ten seconds, until the filler is done.
    let mut progress = tokio::time::interval(Duration::from_secs(10));
    progress.tick().await;
    let mut filler = filler;
    loop {
        tokio::select! {
            _ = &mut filler => break,
            _ = progress.tick() => {
                let s = stats.snapshot();
                eprintln!(
                    "soak: {:>5.0} s  sent {:>7}  processed {:>7}  held {:>4}  rss {:>6.1} MiB",
                    started.elapsed().as_secs_f64(),
                    sent.load(Ordering::Relaxed),
                    processed.load(Ordering::Relaxed),
                    s.in_flight,
                    mib(memory::own().rss_kib),
                );
            }
        }
    }
    sampling.store(false, Ordering::Relaxed);
    let measured_until = started.elapsed().as_secs_f64();
    let samples = sampler.await.context("the RSS sampler")?;

    // Drain what is left, then stop the engine.
    let drain_deadline = Instant::now() + Duration::from_secs(args.drain_secs);
    let sent_total = sent.load(Ordering::Relaxed);
    let distinct = || {
        seen.iter()
            .filter(|c| c.load(Ordering::Relaxed) > 0)
            .count() as u64
    };
    let mut drained = false;
    while Instant::now() < drain_deadline {
        if distinct() >= sent_total && sqs::counts(&client, &url).await == (0, 0) {
            drained = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = stop_engine.send(());
    let engine_stats = engine_task
        .await
        .context("the engine task")?
        .context("the engine")?;
    peak_sampler.abort();
    sqs::delete_queue(&client, &url).await;

    // What became of the messages. A message whose send failed for good was never on the
    // queue; the counts cover every message the filler planned, so those show as lost only if
    // sends failed, which fails the run too.
    let (mut lost, mut duplicates, mut processed_distinct) = (0u64, 0u64, 0u64);
    for cell in seen.iter() {
        match cell.load(Ordering::Relaxed) {
            0 => lost += 1,
            n => {
                processed_distinct += 1;
                duplicates += u64::from(n - 1);
            }
        }
    }
    let send_failures = send_failures.load(Ordering::Relaxed);
    lost = lost.saturating_sub(send_failures);

    let summary = summarize(&args, &samples, measured_until);
    let peak_in_flight = peak.load(Ordering::Relaxed);
    let passed = summary.flat
        && lost == 0
        && drained
        && send_failures == 0
        && peak_in_flight <= capacity as u64;
    let summary = Summary {
        duration_secs: args.duration_secs,
        rate: args.rate,
        sent: sent_total,
        send_failures,
        processed: processed_distinct,
        lost,
        duplicates,
        drained,
        peak_in_flight,
        capacity,
        passed,
        ..summary
    };
    println!(
        "soak: {} s at {} msg/s: sent {}, processed {}, lost {}, duplicates {}, drained {}; \
         held at most {} (max_held = workers + prefetch = {}); SQS calls {} ({} failed)",
        summary.duration_secs,
        summary.rate,
        summary.sent,
        summary.processed,
        summary.lost,
        summary.duplicates,
        summary.drained,
        summary.peak_in_flight,
        summary.capacity,
        engine_stats.total_calls(),
        engine_stats.receive_message.failed
            + engine_stats.delete_message_batch.failed
            + engine_stats.change_message_visibility_batch.failed,
    );
    println!(
        "soak: RSS over {} samples: first {:.0} s window mean {:.1} MiB, last window mean {:.1} \
         MiB (growth {:+.2} MiB, allowed {:.2}), max {:.1} MiB, slope {:+.0} KiB/min: {}",
        summary.rss_samples,
        summary.window_secs,
        summary.first_window_mean_mib,
        summary.last_window_mean_mib,
        summary.growth_mib,
        summary.allowed_growth_mib,
        summary.max_mib,
        summary.slope_kib_per_min,
        if summary.flat { "flat" } else { "NOT FLAT" },
    );
    println!("{}", serde_json::to_string(&summary)?);
    if !passed {
        eprintln!("soak: FAILED");
        std::process::exit(1);
    }
    Ok(())
}

/// The memory part of the summary, from the RSS samples (seconds since the start, KiB).
fn summarize(args: &Args, samples: &[(f64, u64)], until: f64) -> Summary {
    let warmup = args.warmup_secs as f64;
    let measured: Vec<(f64, f64)> = samples
        .iter()
        .filter(|(t, _)| *t >= warmup)
        .map(|&(t, kib)| (t, kib as f64))
        .collect();
    let window = (args.window_secs as f64)
        .min((until - warmup) / 3.0)
        .max(1.0);
    let mean = |points: Vec<f64>| {
        if points.is_empty() {
            0.0
        } else {
            points.iter().sum::<f64>() / points.len() as f64
        }
    };
    let first = mean(
        measured
            .iter()
            .filter(|(t, _)| *t < warmup + window)
            .map(|p| p.1)
            .collect(),
    );
    let last = mean(
        measured
            .iter()
            .filter(|(t, _)| *t > until - window)
            .map(|p| p.1)
            .collect(),
    );
    let max = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let after_first: Vec<(f64, f64)> = measured
        .iter()
        .copied()
        .filter(|(t, _)| *t >= warmup + window)
        .collect();
    let growth_kib = last - first;
    let allowed_kib = (first * args.flat_percent / 100.0).max(args.flat_slack_mib * 1024.0);
    Summary {
        duration_secs: 0,
        rate: 0,
        sent: 0,
        send_failures: 0,
        processed: 0,
        lost: 0,
        duplicates: 0,
        drained: false,
        peak_in_flight: 0,
        capacity: 0,
        rss_samples: samples.len(),
        window_secs: window,
        first_window_mean_mib: first / 1024.0,
        last_window_mean_mib: last / 1024.0,
        max_mib: mib(max),
        growth_mib: growth_kib / 1024.0,
        allowed_growth_mib: allowed_kib / 1024.0,
        slope_kib_per_min: slope(&after_first) * 60.0,
        flat: measured.len() >= 3 && growth_kib <= allowed_kib,
        passed: false,
    }
}

/// The least-squares slope of `points`, y per x; 0 with fewer than two points.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in points {
        num += (x - mean_x) * (y - mean_y);
        den += (x - mean_x) * (x - mean_x);
    }
    if den == 0.0 { 0.0 } else { num / den }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(duration: &str) -> Args {
        Args::parse_from(["soak", "--duration-secs", duration])
    }

    #[test]
    fn slope_of_a_line_and_of_a_constant() {
        let line: Vec<(f64, f64)> = (0..10)
            .map(|x| (f64::from(x), 3.0 * f64::from(x) + 1.0))
            .collect();
        assert!((slope(&line) - 3.0).abs() < 1e-9);
        let flat: Vec<(f64, f64)> = (0..10).map(|x| (f64::from(x), 7.0)).collect();
        assert!(slope(&flat).abs() < 1e-9);
        assert!(slope(&[(1.0, 1.0)]).abs() < 1e-9);
    }

    #[test]
    fn constant_memory_is_flat_and_steady_growth_is_not() {
        let args = args("600");
        let constant: Vec<(f64, u64)> = (0..600).map(|t| (f64::from(t), 30_000)).collect();
        let summary = summarize(&args, &constant, 600.0);
        assert!(summary.flat);
        assert!((summary.window_secs - 60.0).abs() < 1e-9);
        // 20 KiB a second: about 11 MiB more in the last minute than in the first.
        let growing: Vec<(f64, u64)> = (0..600u32)
            .map(|t| (f64::from(t), 30_000 + 20 * u64::from(t)))
            .collect();
        let summary = summarize(&args, &growing, 600.0);
        assert!(!summary.flat, "{summary:?}");
        assert!(
            (summary.slope_kib_per_min - 1200.0).abs() < 1.0,
            "{summary:?}"
        );
    }

    #[test]
    fn short_runs_compare_thirds() {
        let args = args("60");
        let samples: Vec<(f64, u64)> = (0..60).map(|t| (f64::from(t), 30_000)).collect();
        let summary = summarize(&args, &samples, 60.0);
        assert!((summary.window_secs - 50.0 / 3.0).abs() < 1e-9);
        assert!(summary.flat);
    }
}
