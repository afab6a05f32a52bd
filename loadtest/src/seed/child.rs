//! The child side of `seed-payments` (`loadtest run-seed --job JSON`, hidden): runs the
//! payments service on one broker until the parent says stop, and reports its own CPU and peak
//! memory.
//!
//! Protocol on stdout: `started` once the service runs, in the fan-out variant `drained` once
//! both subscribed queues' subscribers have handled every payment, then `result {json}` after
//! its graceful shutdown. The parent writes a line (or closes stdin) to stop it.

use std::io::Write as _;
use std::num::NonZeroUsize;

use anyhow::{Context as _, Result};
use aws_config::SdkConfig;
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use serde::{Deserialize, Serialize};

use super::brokers::{sqs_engine_broker, sqs_engine_fan_out, sqs_sns_broker, sqs_sns_fan_out};
use crate::compare::child::usage;
use crate::target::TargetArgs;

/// The line printed once the service runs.
pub(crate) const STARTED: &str = "started";
/// The line the fan-out variant prints once both subscribed queues' subscribers have handled
/// every payment.
pub(crate) const DRAINED: &str = "drained";
/// The prefix of the result line.
pub(crate) const RESULT: &str = "result ";

/// The broker a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Broker {
    /// sqs-engine's RustStream broker.
    SqsEngine,
    /// `ruststream-sqs-sns` 0.7.
    SqsSns,
}

impl Broker {
    /// The broker's name in the table.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::SqsEngine => "sqs-engine",
            Self::SqsSns => "sqs-sns",
        }
    }
}

/// What the parent gives a child.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SeedJob {
    /// The broker to run.
    pub(crate) broker: Broker,
    /// The endpoint to talk to (the counting proxy's, on LocalStack).
    pub(crate) endpoint: Option<String>,
    /// The region.
    pub(crate) region: Option<String>,
    /// The access key to use, when the run has an account of its own (LocalStack names the
    /// account after a 12-digit key).
    pub(crate) access_key: Option<String>,
    /// Deliveries of `book` at once (and of each subscribed queue's subscriber).
    pub(crate) workers: usize,
    /// The fan-out variant, with this many payments on the queue; `None`: the seed's service.
    #[serde(default)]
    pub(crate) fan_out: Option<u64>,
}

/// What a child measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SeedChildResult {
    /// CPU seconds (user + system) from before the service started to after its shutdown.
    pub(crate) cpu_secs: f64,
    /// Peak resident memory of the process, KiB.
    pub(crate) max_rss_kib: u64,
}

/// Options of the hidden `run-seed` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SeedChildArgs {
    /// The job, as JSON.
    #[arg(long)]
    job: String,
}

/// The SDK configuration of a run: the target's, with the run's own access key when it has one.
pub(crate) async fn sdk_config(
    endpoint: Option<String>,
    region: Option<String>,
    access_key: Option<&str>,
) -> SdkConfig {
    let config = TargetArgs { endpoint, region }.sdk_config_quietly().await;
    match access_key {
        Some(key) => config
            .into_builder()
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                key,
                "test",
                None,
                None,
                "seed-payments",
            )))
            .build(),
        None => config,
    }
}

/// Runs the job: the service until stdin says stop, then the result line.
///
/// # Errors
///
/// When the job cannot be read, the service cannot start or stop, or stdout cannot be written.
pub(crate) async fn run(args: SeedChildArgs) -> Result<()> {
    let job: SeedJob = serde_json::from_str(&args.job).context("reading the job")?;
    let config = sdk_config(
        job.endpoint.clone(),
        job.region.clone(),
        job.access_key.as_deref(),
    )
    .await;
    let workers = NonZeroUsize::new(job.workers).unwrap_or(NonZeroUsize::MIN);
    let (cpu_before, _) = usage()?;
    let started = || {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{STARTED}");
        let _ = stdout.flush();
    };
    let stop = async {
        let _ = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)
        })
        .await;
    };
    let drained = || {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{DRAINED}");
        let _ = stdout.flush();
    };
    let payments = job
        .fan_out
        .map(|payments| usize::try_from(payments).unwrap_or(usize::MAX));
    match (job.broker, payments) {
        (Broker::SqsEngine, None) => {
            sqs_engine_broker::serve(config, workers, started, stop).await?;
        }
        (Broker::SqsSns, None) => sqs_sns_broker::serve(config, workers, started, stop).await?,
        (Broker::SqsEngine, Some(payments)) => {
            sqs_engine_fan_out::serve(config, workers, payments, started, drained, stop).await?;
        }
        (Broker::SqsSns, Some(payments)) => {
            sqs_sns_fan_out::serve(config, workers, payments, started, drained, stop).await?;
        }
    }
    let (cpu_after, max_rss_kib) = usage()?;
    let result = SeedChildResult {
        cpu_secs: cpu_after - cpu_before,
        max_rss_kib,
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{RESULT}{}", serde_json::to_string(&result)?)?;
    stdout.flush()?;
    Ok(())
}
