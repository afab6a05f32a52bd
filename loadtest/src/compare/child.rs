//! The child side of a comparison (`loadtest run-system --job JSON`, hidden): runs one
//! system on one queue, measures its own CPU and memory with `getrusage(RUSAGE_SELF)`, and
//! prints `progress N` lines while it runs and one `result {json}` line at the end.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use aws_sdk_sqs::Client;
use nix::sys::resource::{UsageWho, getrusage};
use tokio::time::Instant;

use super::job::{ChildResult, Job};
use super::probe::Probe;
use super::recorder::SettlementRecorder;
use super::system::System;
use crate::fill::{body, now_micros};
use crate::target::TargetArgs;

/// How often progress is printed and the timeline sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// The prefix of a progress line.
pub(crate) const PROGRESS: &str = "progress ";
/// The prefix of the result line.
pub(crate) const RESULT: &str = "result ";

/// Options of the hidden `run-system` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ChildArgs {
    /// The job, as JSON.
    #[arg(long)]
    job: String,
}

/// CPU seconds (user + system) and peak RSS (KiB) of this process so far.
///
/// The peak is `VmHWM` of `/proc/self/status` where there is one: Linux keeps
/// `ru_maxrss` across `execve`, so a child's `ru_maxrss` is at least its parent's peak at
/// the fork, while `VmHWM` belongs to the child's own address space.
pub(crate) fn usage() -> Result<(f64, u64)> {
    let usage = getrusage(UsageWho::RUSAGE_SELF).context("getrusage")?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    let cpu = secs(usage.user_time()) + secs(usage.system_time());
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| vm_hwm_kib(&status))
        .unwrap_or_else(|| u64::try_from(usage.max_rss()).unwrap_or(0));
    Ok((cpu, peak))
}

/// The `VmHWM` line of a `/proc/<pid>/status`, in KiB.
fn vm_hwm_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Runs the job and prints its result.
///
/// # Errors
///
/// When the job cannot be read, the system cannot start, or stdout cannot be written.
pub(crate) async fn run(args: ChildArgs) -> Result<()> {
    let job: Job = serde_json::from_str(&args.job).context("reading the job")?;
    let config = TargetArgs {
        endpoint: job.endpoint.clone(),
        region: job.region.clone(),
    }
    .sdk_config_quietly()
    .await;
    let probe = Arc::new(Probe::new(job.messages));
    if job.system == System::SqsEngine {
        metrics::set_global_recorder(SettlementRecorder::new(Arc::clone(&probe)))
            .map_err(|_| anyhow::anyhow!("a metrics recorder is already installed"))?;
    }
    let (cpu_before, _) = usage()?;

    let sampler = tokio::spawn(sample(Arc::clone(&probe)));
    let sender = job.light.then(|| {
        tokio::spawn(send_one_at_a_time(
            Client::new(&config),
            job.clone(),
            Arc::clone(&probe),
        ))
    });
    let limit = Duration::from_secs(job.timeout_secs);
    let calls = {
        let run = job.system.run(&job, &config, Arc::clone(&probe));
        tokio::pin!(run);
        tokio::select! {
            result = &mut run => Some(result?),
            () = tokio::time::sleep(limit) => None,
        }
    };
    let completed = probe.done.is_cancelled();
    probe.done.cancel();
    if let Some(sender) = sender {
        sender.abort();
    }
    let timeline = sampler.await.unwrap_or_default();
    let (cpu_after, max_rss_kib) = usage()?;
    let result = ChildResult {
        system: job.system,
        completed,
        finished: probe.finished_count(),
        deliveries: probe.deliveries(),
        elapsed_secs: probe.elapsed_secs(),
        cpu_secs: cpu_after - cpu_before,
        max_rss_kib,
        calls: calls.flatten(),
        settlement: probe.settlement.percentiles(),
        e2e: probe.e2e.percentiles(),
        round_trip: probe.round_trip.percentiles(),
        timeline,
        order_violations: job.fifo_groups.map(|_| probe.order.violations()),
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{RESULT}{}", serde_json::to_string(&result)?)?;
    stdout.flush()?;
    Ok(())
}

/// Prints progress and samples the timeline until the run is done.
async fn sample(probe: Arc<Probe>) -> Vec<[f64; 2]> {
    let mut timeline = vec![[0.0, 0.0]];
    let mut tick = tokio::time::interval_at(Instant::now() + SAMPLE_EVERY, SAMPLE_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = probe.done.cancelled() => {
                timeline.push([probe.elapsed_secs(), probe.finished_count() as f64]);
                return timeline;
            }
        }
        let finished = probe.finished_count();
        timeline.push([probe.start.elapsed().as_secs_f64(), finished as f64]);
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{PROGRESS}{finished}");
        let _ = stdout.flush();
    }
}

/// Light load: sends one message, waits until it is finished, and repeats until the target.
/// Each `SendMessage` round trip is recorded as the target's round trip.
async fn send_one_at_a_time(client: Client, job: Job, probe: Arc<Probe>) {
    for index in 0..job.messages {
        let sending = std::time::Instant::now();
        let sent = client
            .send_message()
            .queue_url(&job.queue_url)
            .message_body(body(index, now_micros(), job.body_size))
            .send()
            .await;
        if sent.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        probe.round_trip.record(sending.elapsed());
        tokio::select! {
            () = probe.settled.notified() => {}
            () = probe.done.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_rss_is_read_from_the_status_file() {
        let status = "Name:\tloadtest\nVmPeak:\t  100 kB\nVmHWM:\t   23456 kB\nVmRSS:\t 2000 kB\n";
        assert_eq!(vm_hwm_kib(status), Some(23_456));
        assert_eq!(vm_hwm_kib("Name: x\n"), None);
    }
}
