//! # loadtest
//!
//! Load tests for sqs-engine.
//!
//! - `loadtest` (no subcommand) or `loadtest compare [--target embedded|localstack]
//!   [--endpoint URL]` compares sqs-engine (its native API and its RustStream broker)
//!   with ruststream-sqs-sns, a naive aws-sdk-sqs loop and the raw ceiling, scenario by scenario, each system in a child process of its
//!   own; it prints a table and writes a JSON summary and an SVG plot (see [`compare`]).
//!   Ack-only and io-5ms also run with the embedded server adding an SQS-like latency to
//!   every call; `--latency LIST` or `--latency-ms N` pick the latencies instead.
//! - `loadtest ci` is the short comparison CI runs, failing when sqs-engine misses its gates.
//! - `loadtest fill --queue NAME --messages N` puts N messages on a queue with
//!   `SendMessageBatch`, several calls in flight.
//! - `loadtest consume --queue NAME --messages N` consumes them with the engine, acking each,
//!   and reports throughput and SQS calls per message from the engine's own counters.
//! - `loadtest serve [--addr 127.0.0.1:0]` runs the embedded, in-memory SQS server of
//!   [`server`] and prints its endpoint: a target fast enough that the engine, not SQS, is
//!   measured. It is a benchmark target, not evidence of correctness. `--latency sqs` or
//!   `--latency-ms N` make it hold every call as a region's SQS would.
//! - `loadtest seed-payments [--target embedded|localstack] [--messages N] [--workers 32]` runs
//!   the payments service of `seeds/` on sqs-engine's broker and on ruststream-sqs-sns, each in
//!   a child process, and reports SQS calls per payment by action, payments/s, CPU and memory
//!   (see [`seed`]). `--fan-out` publishes each booking to an SNS topic that fans out to two
//!   queues, each with a subscriber, and reports SQS and SNS calls apart.
//!
//! Each subcommand lives in its own module; where SQS is and how to reach it is in
//! [`target`], and the report types and their output in [`report`]. Logs go to stderr,
//! filtered by `RUST_LOG` (default `warn`); the summary goes to stdout.

mod behaviour;
mod ci;
mod compare;
mod consume;
mod fill;
mod large_payloads;
mod number_arg;
mod progress;
mod report;
mod seed;
mod serve;
mod target;

// The embedded server is the library's (`loadtest::server`), so that the benches can start it
// too; `crate::server` names it here as before.
use loadtest::server;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// Load tests for sqs-engine. Without a subcommand, runs the comparison (`loadtest compare`,
/// its options below) on the embedded server: no setup needed.
#[derive(Debug, Parser)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Cli {
    /// What to do; without one, the comparison.
    #[command(subcommand)]
    command: Option<Command>,

    /// The comparison's options, when no subcommand is given.
    #[command(flatten)]
    compare: compare::CompareArgs,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Compare sqs-engine (its native API and its RustStream broker) with ruststream-sqs-sns,
    /// a naive aws-sdk-sqs loop and the raw ceiling, scenario by scenario (the default).
    Compare(compare::CompareArgs),
    /// A short comparison on the embedded server and LocalStack that fails when sqs-engine
    /// misses its gates.
    Ci(ci::CiArgs),
    /// One system's run in a comparison (internal: the parent starts it).
    #[command(hide = true)]
    RunSystem(compare::child::ChildArgs),
    /// Send messages to a queue with SendMessageBatch.
    Fill(fill::FillArgs),
    /// Consume messages with the sqs-engine engine (acking each, or a deterministic mix of
    /// outcomes) and report what it cost.
    Consume(consume::ConsumeArgs),
    /// What a body stored in S3 costs against the same body sent in SQS: both published
    /// through the broker and consumed by the engine, on one SQS and S3 (LocalStack's port by
    /// default); calls to SQS and S3, CPU and throughput per message, and their ratios.
    LargePayloads(large_payloads::LargePayloadArgs),
    /// Run the embedded in-memory SQS server (a benchmark target) and print its endpoint.
    Serve(serve::ServeArgs),
    /// Run the payments seed service on sqs-engine's broker and on ruststream-sqs-sns, and
    /// report SQS calls per payment, throughput, CPU and memory of each (`--fan-out`: the
    /// bookings fanned out through an SNS topic to two queues, SNS calls counted too).
    SeedPayments(seed::SeedArgs),
    /// One broker's run of `seed-payments` (internal: the parent starts it).
    #[command(hide = true)]
    RunSeed(seed::child::SeedChildArgs),
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
        None => compare::run(cli.compare).await,
        Some(Command::Compare(args)) => compare::run(args).await,
        Some(Command::Ci(args)) => ci::run(args).await,
        Some(Command::RunSystem(args)) => compare::child::run(args).await,
        Some(Command::Fill(args)) => fill::run(args).await,
        Some(Command::Consume(args)) => consume::run(args).await,
        Some(Command::Serve(args)) => serve::run(args).await,
        Some(Command::LargePayloads(args)) => large_payloads::run(args).await,
        Some(Command::SeedPayments(args)) => seed::run(args).await,
        Some(Command::RunSeed(args)) => seed::child::run(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
