//! What a comparison records of each system's run.

use std::collections::BTreeMap;

use serde::Serialize;

use super::job::ChildResult;
use super::probe::Percentiles;
use super::scenario::ScenarioKind;
use crate::server::Latency;

/// One system's run in one scenario and repetition, as recorded.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunRecord {
    /// The scenario.
    pub(crate) scenario: ScenarioKind,
    /// The latency the embedded server added to every call.
    pub(crate) latency: Latency,
    /// The raw ceiling's loops in this run (the ceiling only).
    pub(crate) ceiling_loops: Option<usize>,
    /// The repetition, from 0.
    pub(crate) repetition: u32,
    /// The position of the system in this repetition's order, from 0.
    pub(crate) position: usize,
    /// What the child measured.
    pub(crate) result: ChildResult,
    /// The calls the server saw during the run, by action; `None` when not countable.
    pub(crate) server_calls: Option<BTreeMap<String, u64>>,
    /// Send time to the server's answer to the delete, of the messages deleted (acked or
    /// dropped), as the embedded server measured it; `None` on any other target.
    pub(crate) e2e_settled: Option<Percentiles>,
}
