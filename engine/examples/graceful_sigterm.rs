//! Graceful shutdown on SIGTERM (what Kubernetes and systemd send) and on Ctrl-C.
//!
//! On the first signal the engine stops receiving, returns the messages received but not
//! started (visibility 0, so another consumer gets them at once), and gives running handlers
//! up to the shutdown timeout to finish. Handlers still running then are dropped: their
//! messages come back when their visibility lapses. Every settlement a handler made is sent
//! before `run` returns, whatever the timeout.
//!
//! Each handler here sleeps for the number of milliseconds in its message's body (1000 when
//! the body is not a number), so a body of `60000` shows a handler cut off by the timeout.
//!
//! ```sh
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --example graceful_sigterm -- work 5   # queue, shutdown timeout (s)
//! kill -TERM <pid>   # or Ctrl-C
//! ```

use std::time::Duration;

use sqs_engine::{Engine, Message, Outcome};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();

    let mut args = std::env::args().skip(1);
    let queue = args.next().unwrap_or_else(|| "work".to_owned());
    let shutdown_timeout = match args.next() {
        Some(secs) => Duration::from_secs(secs.parse()?),
        None => Duration::from_secs(10),
    };

    let config = aws_config::load_from_env().await;
    let engine = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        .create_if_missing(true)
        .workers(32)
        .shutdown_timeout(shutdown_timeout)
        .build()?;

    tracing::info!(%queue, pid = std::process::id(), ?shutdown_timeout, "consuming; SIGTERM or Ctrl-C stops");
    let stats = engine.run(handle, shutdown_signal()).await?;
    tracing::info!(
        received = stats.messages_received,
        settled = stats.settled_ok(),
        cut_off = stats.unsettled,
        "stopped: every settlement sent"
    );
    Ok(())
}

async fn handle(message: Message) -> Outcome {
    let millis = message.body().trim().parse().unwrap_or(1000);
    tracing::info!(id = message.id(), millis, "started");
    tokio::time::sleep(Duration::from_millis(millis)).await;
    tracing::info!(id = message.id(), "done");
    Outcome::Ack
}

/// Completes on the first SIGTERM or Ctrl-C (SIGINT).
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
