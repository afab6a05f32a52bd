//! The Prometheus exporter (feature `prometheus`): installs a recorder for the `metrics` facade
//! and serves, over HTTP:
//!
//! - `/metrics`: the metrics, in Prometheus' text format;
//! - `/healthz`: 200 while every engine of the process is healthy, 503 once one fails in a way
//!   retrying cannot mend (its queue is gone, its credentials are refused): a liveness probe;
//! - `/readyz`: 200 while every engine of the process is running and healthy, 503 before
//!   their queues are open, while they drain, and when one is unhealthy: a readiness probe.
//!
//! The health endpoints answer with one line per engine ([`Health`](crate::Health)'s
//! `Display`). The library itself depends only on the `metrics` facade; an application that
//! wants Prometheus calls [`install`] once at startup, inside a tokio runtime.

mod server;

use std::net::{Ipv4Addr, SocketAddr, TcpListener};

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};

pub use metrics_exporter_prometheus::PrometheusHandle;

/// Where `/metrics`, `/healthz` and `/readyz` are served by default: loopback only, port 9464. Bind another address
/// explicitly to expose it beyond this host.
pub const DEFAULT_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 9464);

/// Histogram buckets for durations, in seconds: from 1 ms to a minute.
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// Histogram buckets for entries per batch call.
const ENTRY_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
/// Histogram buckets for receive counts.
const RECEIVE_COUNT_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1000.0];

/// Installs the Prometheus recorder as the global `metrics` recorder and serves `/metrics`,
/// `/healthz` and `/readyz` on `addr` (or [`DEFAULT_ADDR`]). Histograms get buckets suited to
/// each metric, so dashboards can take quantiles across instances with `histogram_quantile`.
///
/// # Errors
///
/// When a recorder is already installed, or the listener cannot be bound.
///
/// # Panics
///
/// Outside a tokio runtime: the HTTP listener runs as a task on the current runtime.
pub fn install(addr: Option<SocketAddr>) -> Result<PrometheusHandle, BuildError> {
    let addr = addr.unwrap_or(DEFAULT_ADDR);
    let listener = TcpListener::bind(addr)
        .map_err(|error| BuildError::FailedToCreateHTTPListener(format!("{addr}: {error}")))?;
    install_on(listener)
}

/// As [`install`], serving on a listener the caller bound (port 0 for one the system picks,
/// read back with [`TcpListener::local_addr`]).
///
/// # Errors
///
/// When a recorder is already installed, or the listener cannot be used by tokio.
///
/// # Panics
///
/// Outside a tokio runtime.
pub fn install_on(listener: TcpListener) -> Result<PrometheusHandle, BuildError> {
    let listener = listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
        .map_err(|error| BuildError::FailedToCreateHTTPListener(error.to_string()))?;
    let builder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)?
        .set_buckets_for_metric(
            Matcher::Full("sqs_engine_batch_entries".into()),
            ENTRY_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full("sqs_engine_receive_count".into()),
            RECEIVE_COUNT_BUCKETS,
        )?;
    let recorder = builder.build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)?;
    crate::metrics::describe();
    tokio::spawn(server::serve(listener, handle.clone()));
    let upkeep = handle.clone();
    tokio::spawn(async move {
        // Drains the histograms' buffers now and then, so memory stays flat between scrapes.
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}
