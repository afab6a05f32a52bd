//! A whole comparison, as written to JSON: its settings, every run and the summary.

use std::path::PathBuf;

use serde::Serialize;

use super::handlers_alone::HandlersAlone;
use super::record::RunRecord;
use super::scenario::Scenario;
use super::summary::Summary;

/// A whole comparison, as written to JSON.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Comparison {
    /// The target, as text.
    pub(crate) target: String,
    /// Whether it was the embedded server.
    pub(crate) embedded: bool,
    /// Where server-side call counts come from.
    pub(crate) server_calls_source: &'static str,
    /// The scenarios, as sized, each at its latency.
    pub(crate) scenarios: Vec<Scenario>,
    /// The seed of the latency draws.
    pub(crate) latency_seed: u64,
    /// Handler invocations at once.
    pub(crate) workers: usize,
    /// Repetitions.
    pub(crate) repetitions: u32,
    /// Every run.
    pub(crate) runs: Vec<RunRecord>,
    /// The handlers alone, once per repetition of each scenario they bound.
    pub(crate) handlers_alone: Vec<HandlersAlone>,
    /// The aggregated rows and goals.
    pub(crate) summary: Summary,
    /// Where the plot was written.
    pub(crate) plot: Option<PathBuf>,
}
