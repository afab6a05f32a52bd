//! `loadtest serve`: runs the embedded SQS server ([`crate::server`]) until interrupted,
//! for manual runs and for `fill` and `consume` in other processes.
//!
//! The endpoint URL is printed alone on a line of stdout as soon as the server listens, so
//! a script can read it; everything else goes to stderr. The server is a benchmark target,
//! not evidence of correctness: correctness is proven against LocalStack.

use std::io::Write as _;
use std::net::SocketAddr;

use anyhow::{Context, Result};

use crate::server::{DEFAULT_SEED, EmbeddedSqs, Latency, Overload};

/// Options of `loadtest serve`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,

    /// Latency added to every call: `none`, `sqs` (log-normal, median 10 ms, p99 50 ms), a
    /// number of milliseconds (fixed), or `lognormal:MEDIAN,P99`.
    #[arg(long, default_value = "none", conflicts_with = "latency_ms")]
    latency: Latency,

    /// A fixed latency added to every call, in milliseconds (the same as `--latency N`).
    #[arg(long, value_name = "N")]
    latency_ms: Option<f64>,

    /// Seed of the latency draws: the same seed draws the same latencies.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    latency_seed: u64,

    /// Make the server overloaded: `SLOTS,MICROS`, SQS calls served at once and the
    /// microseconds each message on its queues adds to a call (`1,50`: one at a time, 100 ms
    /// a call at 2,000 messages); a call whose client gave up is still applied.
    #[arg(long, value_name = "SLOTS,MICROS")]
    overload: Option<Overload>,
}

/// Runs `loadtest serve`: starts the server, prints its endpoint, and on Ctrl-C or SIGTERM
/// shuts it down and prints the calls it answered, by action, to stderr.
///
/// # Errors
///
/// When the address cannot be bound, or stdout cannot be written.
pub(crate) async fn run(args: ServeArgs) -> Result<()> {
    let server = EmbeddedSqs::start(args.addr)?;
    let latency = match args.latency_ms {
        Some(ms) => format!("{ms}").parse().map_err(anyhow::Error::msg)?,
        None => args.latency,
    };
    server.set_latency(latency, args.latency_seed);
    server.set_overload(args.overload);
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", server.endpoint()).context("printing the endpoint")?;
    stdout.flush().context("printing the endpoint")?;
    drop(stdout);
    eprintln!(
        "embedded SQS server listening at {} (in memory; a benchmark target, not evidence \
         of correctness), latency {}{}; Ctrl-C or SIGTERM stops it",
        server.endpoint(),
        server.latency(),
        args.overload
            .map(|overload| format!(", overloaded: {overload}"))
            .unwrap_or_default()
    );
    stopped().await;
    let calls = server.call_counts();
    server.shutdown().await?;
    let total: u64 = calls.iter().map(|(_, count)| count).sum();
    eprintln!("embedded SQS server stopped after {total} calls");
    for (action, count) in calls {
        eprintln!("  {action:<30} {count:>12}");
    }
    Ok(())
}

/// Completes on Ctrl-C or (on Unix) SIGTERM; a signal that cannot be listened for is left
/// out.
async fn stopped() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
