//! How one consumer's run ended, whichever way it received.

use std::time::Duration;

use sqs_engine::Stats;

/// How one consumer's run ended.
#[derive(Debug, Clone)]
pub struct Stopped {
    /// When `run` returned, since the run began.
    pub at: Duration,
    /// The engine's counters, or why it failed (the error and its sources); none through the
    /// broker, which has no counters of its own to compare.
    pub stats: Option<Result<Stats, String>>,
    /// Whether the engine's health said healthy once `run` returned; none through the broker.
    pub healthy: Option<bool>,
}
