//! A deployable consumer: settings from the environment, Prometheus metrics, logs through
//! `tracing-subscriber`, and a graceful shutdown on SIGTERM. `deploy/` builds it into an
//! image and runs it on Kubernetes.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `SQS_ENGINE_QUEUE` | the queue, by name or URL | required |
//! | `SQS_ENGINE_WORKERS` | handlers at once | 64 |
//! | `SQS_ENGINE_RECEIVERS` | long-poll loops | 4 |
//! | `SQS_ENGINE_PREFETCH` | messages received ahead of a free worker | 10 per receiver |
//! | `SQS_ENGINE_MAX_HELD` | the most messages held in flight (received, not yet settled) | the engine's, 4096 |
//! | `SQS_ENGINE_SHUTDOWN_TIMEOUT_SECS` | how long running handlers get at shutdown | 30 |
//! | `SQS_ENGINE_MAX_ATTEMPTS`, `SQS_ENGINE_DEAD_LETTER` | the redrive policy, both or neither | none |
//! | `SQS_ENGINE_GIVE_UP_AFTER_SECS` | how long receives, deletes or visibility changes may fail in a way retrying cannot mend (queue deleted, access or KMS key refused) before the process exits with an error | 300 |
//! | `SQS_ENGINE_METRICS_ADDR` | where `/metrics`, `/healthz` and `/readyz` are served (`0.0.0.0:9464` in a pod) | `127.0.0.1:9464` |
//! | `RUST_LOG` | the log filter | `info` |
//!
//! The AWS SDK reads its own variables: `AWS_REGION`, credentials (in a pod, usually those of
//! the service account's IAM role), and `AWS_ENDPOINT_URL` for another SQS such as LocalStack.
//!
//! One instance holds at most `SQS_ENGINE_MAX_HELD` messages in flight (received and not yet
//! settled). An autoscaler counting the queue's in-flight messages should count that many per
//! instance.
//!
//! `service --shutdown-budget` prints, as JSON, the longest a graceful shutdown takes with
//! these settings and the engine's defaults, and exits without opening the queue:
//! `receivers_stop_secs` (a long poll under way gets up to [`sqs_engine::RECEIVE_STOP_GRACE`]),
//! `handlers_secs` (`SQS_ENGINE_SHUTDOWN_TIMEOUT_SECS`), `flush_secs` (the settlements' flush at
//! its worst: every attempt the default [`Backoff`] allows, each bounded by
//! [`sqs_engine::DEFAULT_CALL_TIMEOUT`], with the longest backoff between them) and
//! `total_secs`. A deployment's grace period must outlast `total_secs`:
//! `scripts/check_deploy.py` checks `deploy/kubernetes/deployment.yaml` against it. The flush is
//! one retried call long because its batches go out at once: at least 16 calls of each lane
//! are allowed in flight, 160 messages, and `SQS_ENGINE_MAX_HELD` should stay within that.
//!
//! ```sh
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! SQS_ENGINE_QUEUE=orders cargo run -p sqs-engine --features prometheus --example service
//! ```

use std::net::SocketAddr;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use sqs_engine::{Backoff, Engine, Message, Outcome};

/// The service's settings, read from the environment.
#[derive(Debug)]
struct Settings {
    queue: String,
    workers: usize,
    receivers: usize,
    prefetch: usize,
    max_held: Option<usize>,
    shutdown_timeout: Duration,
    give_up_after: Duration,
    redrive: Option<(u32, String)>,
    metrics_addr: SocketAddr,
}

impl Settings {
    fn from_env() -> Result<Self, String> {
        let queue = var("SQS_ENGINE_QUEUE")?.ok_or("SQS_ENGINE_QUEUE is required")?;
        let workers = parse("SQS_ENGINE_WORKERS")?.unwrap_or(64);
        let receivers = parse("SQS_ENGINE_RECEIVERS")?.unwrap_or(4);
        // The engine's own default: one receive batch of ten per receiver.
        let prefetch = parse("SQS_ENGINE_PREFETCH")?.unwrap_or(10 * receivers);
        let max_held = parse("SQS_ENGINE_MAX_HELD")?;
        let shutdown_timeout =
            Duration::from_secs(parse("SQS_ENGINE_SHUTDOWN_TIMEOUT_SECS")?.unwrap_or(30));
        let give_up_after =
            Duration::from_secs(parse("SQS_ENGINE_GIVE_UP_AFTER_SECS")?.unwrap_or(300));
        let redrive = match (
            parse("SQS_ENGINE_MAX_ATTEMPTS")?,
            var("SQS_ENGINE_DEAD_LETTER")?,
        ) {
            (Some(attempts), Some(dead_letter)) => Some((attempts, dead_letter)),
            (None, None) => None,
            _ => {
                return Err(
                    "SQS_ENGINE_MAX_ATTEMPTS and SQS_ENGINE_DEAD_LETTER go together".to_owned(),
                );
            }
        };
        let metrics_addr =
            parse("SQS_ENGINE_METRICS_ADDR")?.unwrap_or(sqs_engine::prometheus::DEFAULT_ADDR);
        Ok(Self {
            queue,
            workers,
            receivers,
            prefetch,
            max_held,
            shutdown_timeout,
            give_up_after,
            redrive,
            metrics_addr,
        })
    }
}

/// The longest each step of a graceful shutdown takes, with `settings` and the engine's
/// defaults (the service sets neither the backoff nor the call timeout).
#[derive(Debug)]
struct ShutdownBudget {
    receivers_stop: Duration,
    handlers: Duration,
    flush: Duration,
}

impl ShutdownBudget {
    fn of(settings: &Settings) -> Self {
        let backoff = Backoff::default();
        let attempts = backoff.max_attempts();
        let calls = sqs_engine::DEFAULT_CALL_TIMEOUT * attempts;
        let backoffs: Duration = (1..attempts).map(|retry| backoff.ceiling(retry)).sum();
        Self {
            receivers_stop: sqs_engine::RECEIVE_STOP_GRACE,
            handlers: settings.shutdown_timeout,
            flush: calls + backoffs,
        }
    }

    fn total(&self) -> Duration {
        self.receivers_stop + self.handlers + self.flush
    }

    fn to_json(&self) -> String {
        format!(
            "{{\"receivers_stop_secs\": {}, \"handlers_secs\": {}, \"flush_secs\": {}, \"total_secs\": {}}}",
            self.receivers_stop.as_secs_f64(),
            self.handlers.as_secs_f64(),
            self.flush.as_secs_f64(),
            self.total().as_secs_f64()
        )
    }
}

/// The variable's value; `None` when it is unset or empty.
fn var(name: &str) -> Result<Option<String>, String> {
    match std::env::var(name) {
        Ok(value) if value.trim().is_empty() => Ok(None),
        Ok(value) => Ok(Some(value.trim().to_owned())),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{name} is not UTF-8")),
    }
}

/// The variable's value parsed; `None` when it is unset or empty.
fn parse<T: FromStr>(name: &str) -> Result<Option<T>, String>
where
    T::Err: std::fmt::Display,
{
    var(name)?
        .map(|value| {
            value
                .parse()
                .map_err(|error| format!("{name}={value:?}: {error}"))
        })
        .transpose()
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag] if flag == "--shutdown-budget" => {
            return match Settings::from_env() {
                Ok(settings) => {
                    println!("{}", ShutdownBudget::of(&settings).to_json());
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("service: {error}");
                    ExitCode::FAILURE
                }
            };
        }
        _ => {
            eprintln!(
                "service: unexpected arguments {args:?}: settings come from SQS_ENGINE_* variables; the only flag is --shutdown-budget"
            );
            return ExitCode::from(2);
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        // Log collectors read plain text better than terminal colours.
        .with_ansi(false)
        .init();

    match serve().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let settings = Settings::from_env()?;
    tracing::info!(?settings, "starting");

    sqs_engine::prometheus::install(Some(settings.metrics_addr))?;

    let config = aws_config::load_from_env().await;
    let mut builder = Engine::builder()
        .sdk_config(&config)
        .queue(settings.queue.as_str())
        .workers(settings.workers)
        .receivers(settings.receivers)
        .prefetch(settings.prefetch)
        .shutdown_timeout(settings.shutdown_timeout)
        .give_up_after(settings.give_up_after);
    if let Some(max_held) = settings.max_held {
        builder = builder.max_held(max_held);
    }
    if let Some((attempts, dead_letter)) = &settings.redrive {
        builder = builder
            .max_attempts(*attempts)
            .dead_letter(dead_letter.as_str());
    }
    let engine = builder.build()?;
    tracing::info!(
        queue = %settings.queue,
        max_held = settings.max_held,
        metrics = %settings.metrics_addr,
        "engine built"
    );

    let stats = engine.run(process, shutdown_signal()).await?;
    tracing::info!(
        received = stats.messages_received,
        settled = stats.settled_ok(),
        failed = stats.settled_failed(),
        cut_off = stats.unsettled,
        calls = stats.total_calls(),
        "stopped: every settlement sent"
    );
    Ok(())
}

/// The service's work for one message: replace it with your own.
async fn process(message: Message) -> Outcome {
    tracing::debug!(
        id = message.id(),
        receive_count = message.receive_count(),
        bytes = message.body().len(),
        "processed"
    );
    Outcome::Ack
}

/// Completes on the first SIGTERM (what Kubernetes sends before it kills a pod) or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C: shutting down"),
                }
                return;
            }
            Err(error) => tracing::warn!(%error, "no SIGTERM handler; Ctrl-C only"),
        }
    }
    tokio::signal::ctrl_c().await.unwrap_or(());
    tracing::info!("Ctrl-C: shutting down");
}
