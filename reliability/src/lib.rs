//! Crash, shutdown, memory and soak scenarios for sqs-engine, run against LocalStack (a real
//! SQS implementation).
//!
//! # What is here
//!
//! - `ledger-consumer` (binary): consumes one queue with the engine's native API and appends
//!   every message id it processed to a ledger file, one line each, written before the
//!   handler returns its outcome. SIGTERM or SIGINT starts the engine's graceful shutdown.
//!   Every 100 ms it prints a JSON [`status::Status`] line on stdout (messages held,
//!   received, acked, RSS), and a last one with `"kind":"final"` when the engine has stopped.
//! - The tests (`tests/`): each spawns `ledger-consumer` processes against a queue of its own,
//!   injects a fault (SIGTERM with settlements pending, `kill -9` mid-run, a deep backlog with
//!   slow handlers), reads the ledgers back and prints a table of what became of every message
//!   sent: processed, lost, processed twice. LocalStack must be up at
//!   `SQS_ENGINE_TEST_ENDPOINT` (else `AWS_ENDPOINT_URL`, else `http://127.0.0.1:4566`): without
//!   it they fail.
//!   Cargo runs the test binaries one after the other, so the scenarios never load
//!   LocalStack at the same time. To see the tables of passing runs:
//!
//!   ```sh
//!   CARGO_TARGET_DIR=$HOME/.cache/sqs-engine/target \
//!     cargo test -j2 -p sqs-engine-reliability -- --nocapture
//!   ```
//! - `soak` (binary, on demand, not part of `cargo test`): runs the engine for ten minutes
//!   (`--duration-secs`) while a filler task sends at a fixed rate, samples the process's RSS
//!   every second, and fails unless memory stays flat and nothing is lost:
//!
//!   ```sh
//!   CARGO_TARGET_DIR=$HOME/.cache/sqs-engine/target \
//!     cargo run -j2 --release -p sqs-engine-reliability --bin soak -- --duration-secs 600
//!   ```
//!
//!   *Flat* means: after a warm-up (`--warmup-secs`, 10 s), the mean RSS of the last window
//!   (60 s, or a third of the measured run when that is shorter) exceeds the mean of the first
//!   window by no more than the larger of `--flat-percent` (10 %) of the first window's mean
//!   and `--flat-slack-mib` (4 MiB). The summary also gives the maximum and the least-squares
//!   slope after the first window, for information.
//! - `examples/slow_deletes.rs`: a reproduction, not a test: with `DeleteMessageBatch`
//!   slower than receives, the acks waiting for SQS grow without bound while the engine's
//!   count of held messages stays under `max_held` (a settlement waiting for SQS's answer
//!   keeps its message's place, and settlement falling behind holds receiving back). Run it with
//!   `cargo run -p sqs-engine-reliability --example slow_deletes`.
//!
//! The library holds what the binaries and the tests share: the binaries' logging, the status
//! line, memory readings, the consumer process harness and the result table. The SQS helpers and the ledgers are
//! those of every LocalStack-backed test, in `sqs-engine-test-support`.

pub mod harness;
pub mod memory;
pub mod report;
pub mod status;

/// Sends the process's logs to stderr, at the level `RUST_LOG` asks for (`warn` when it names
/// none), without colours: stdout carries the binaries' JSON lines.
///
/// # Panics
///
/// When a global subscriber is already set.
pub fn log_to_stderr() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}
