//! # loadtest
//!
//! Load tests for sqs-engine against a real SQS (AWS, or LocalStack through `--endpoint`).
//!
//! - `loadtest fill --queue NAME --messages N` puts N messages on a queue with
//!   `SendMessageBatch`, several calls in flight.
//! - `loadtest consume --queue NAME --messages N` consumes them with the engine, acking each,
//!   and reports throughput and SQS calls per message from the engine's own counters.
//! - `loadtest serve [--addr 127.0.0.1:0]` runs the embedded, in-memory SQS server of
//!   [`server`] and prints its endpoint: a target fast enough that the engine, not SQS, is
//!   measured. It is a benchmark target, not evidence of correctness.
//!
//! Each subcommand lives in its own module; where SQS is and how to reach it is in
//! [`target`], and the report types and their output in [`report`]. Logs go to stderr,
//! filtered by `RUST_LOG` (default `warn`); the summary goes to stdout.

mod consume;
mod fill;
mod report;
mod serve;
mod server;
mod target;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// Load tests for sqs-engine.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Send messages to a queue with SendMessageBatch.
    Fill(fill::FillArgs),
    /// Consume messages with the sqs-engine engine, acking each, and report what it cost.
    Consume(consume::ConsumeArgs),
    /// Run the embedded in-memory SQS server (a benchmark target) and print its endpoint.
    Serve(serve::ServeArgs),
}

/// Parses the command line, sets up logging and runs the subcommand. A failure is printed
/// to stderr with its causes, and the exit status is 1.
#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Fill(args) => fill::run(args).await,
        Command::Consume(args) => consume::run(args).await,
        Command::Serve(args) => serve::run(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
