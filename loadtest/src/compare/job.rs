//! What the parent asks a child to run, and what the child answers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::probe::Percentiles;
use super::system::System;
use crate::behaviour::Behaviour;

/// One system's run on one queue, as the parent hands it to a child process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Job {
    /// The system to run.
    pub(crate) system: System,
    /// The SQS endpoint; `None` for the SDK's default.
    pub(crate) endpoint: Option<String>,
    /// The region; `None` for the SDK's default (us-east-1 with an endpoint).
    pub(crate) region: Option<String>,
    /// The queue's URL.
    pub(crate) queue_url: String,
    /// Messages to finish.
    pub(crate) messages: u64,
    /// Handler invocations at once (the naive loop: receive loops, one message at a time).
    pub(crate) workers: usize,
    /// Long-poll receivers of sqs-engine.
    pub(crate) receivers: Option<usize>,
    /// Receive-and-delete loops of the raw ceiling.
    pub(crate) ceiling_loops: usize,
    /// What the handler does.
    pub(crate) behaviour: Behaviour,
    /// The visibility timeout to ask for, in seconds; `None` for the queue's own.
    pub(crate) visibility_secs: Option<u64>,
    /// Light load: the child sends one message, waits until it is finished, and repeats.
    pub(crate) light: bool,
    /// Size of the bodies the light-load sender writes.
    pub(crate) body_size: usize,
    /// Seconds after which the child gives up and reports what it did.
    pub(crate) timeout_secs: u64,
    /// FIFO message groups of the queue (a FIFO scenario); `None` on a standard queue.
    #[serde(default)]
    pub(crate) fifo_groups: Option<u64>,
}

/// What a child measured, printed as one JSON line after `result `.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ChildResult {
    /// The system that ran.
    pub(crate) system: System,
    /// Whether the target number of messages was finished before the timeout.
    pub(crate) completed: bool,
    /// Messages finished.
    pub(crate) finished: u64,
    /// Deliveries handled (a message received twice counts twice).
    pub(crate) deliveries: u64,
    /// Seconds from the system's start to its last finished message.
    pub(crate) elapsed_secs: f64,
    /// User and system CPU seconds of the child while the system ran.
    pub(crate) cpu_secs: f64,
    /// The child's peak resident set, in KiB.
    pub(crate) max_rss_kib: u64,
    /// SQS calls by action, as the system counted them; `None` when it cannot.
    pub(crate) calls: Option<BTreeMap<String, u64>>,
    /// Handler return to SQS's answer for its settlement; `None` where it is invisible.
    pub(crate) settlement: Option<Percentiles>,
    /// Send time (from the body) to handler start.
    pub(crate) e2e: Option<Percentiles>,
    /// SendMessage round trips of the light-load sender.
    pub(crate) round_trip: Option<Percentiles>,
    /// `[seconds, messages finished]` every 50 ms, and at the last finished message.
    pub(crate) timeline: Vec<[f64; 2]>,
    /// FIFO order violations the handlers saw (see [`super::probe::OrderCheck`]); `None`
    /// outside a FIFO scenario.
    #[serde(default)]
    pub(crate) order_violations: Option<u64>,
}
