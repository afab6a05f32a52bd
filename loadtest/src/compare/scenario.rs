//! The scenarios of a comparison: what the handler does, how many messages, and whether the
//! queue is filled up front (full load) or one message at a time (light load).

use std::time::Duration;

use serde::Serialize;

use super::system::System;
use crate::behaviour::Behaviour;
use crate::number_arg::parse_number_in;
use crate::server::Latency;

/// How many times the scenario's messages the fast systems run at a latency (see
/// [`System::runs_long_at_latency`]): with a hundred receives or more in flight, the
/// scenario's count would be gone in a few round trips, and the rate would be the ramp-up
/// rather than what the system and the target allow.
pub(crate) const FAST_MESSAGES_AT_LATENCY: u64 = 8;

/// The largest scale of the message counts: 2,000,000 ack-only messages a run.
const MAX_SCALE: f64 = 100.0;

/// Parses a scale of the message counts (`--scale` and the like): a number above 0, at most
/// [`MAX_SCALE`].
///
/// # Errors
///
/// When the text is not a number, or out of that range (0 and below would run the floor of
/// ten messages, and a non-finite one nothing sensible).
pub(crate) fn parse_scale(text: &str) -> Result<f64, String> {
    parse_number_in(
        text,
        |scale| scale > 0.0 && scale <= MAX_SCALE,
        &format!("above 0 and at most {MAX_SCALE}"),
    )
}

/// A scenario, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ScenarioKind {
    /// Ack every message at once, queue filled up front.
    AckOnly,
    /// Each handler awaits 5 ms of simulated I/O, then acks.
    Io5ms,
    /// Each handler awaits 50 ms of simulated I/O, then acks.
    Io50ms,
    /// 10% of first deliveries retry_after 1 s (acked when they come back), 10% dropped.
    Mixed,
    /// Handlers take 3 s with a 2 s visibility timeout: the heartbeat's cost.
    Heartbeat,
    /// One message at a time: send, wait until it is finished, repeat (200 messages). Its
    /// messages/s are the harness's cycle rate, not a throughput.
    Light,
    /// A FIFO queue of 100 groups, messages interleaved across them, handlers of 5 ms: each
    /// group in order, and the handlers' order violations counted.
    Fifo,
}

impl ScenarioKind {
    /// Every scenario, in report order.
    pub(crate) const ALL: [ScenarioKind; 7] = [
        Self::AckOnly,
        Self::Io5ms,
        Self::Io50ms,
        Self::Mixed,
        Self::Heartbeat,
        Self::Light,
        Self::Fifo,
    ];

    /// A short, stable name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::AckOnly => "ack-only",
            Self::Io5ms => "io-5ms",
            Self::Io50ms => "io-50ms",
            Self::Mixed => "mixed",
            Self::Heartbeat => "heartbeat",
            Self::Light => "light",
            Self::Fifo => "fifo",
        }
    }
}

/// A scenario, sized for a run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Scenario {
    /// Which one.
    pub(crate) kind: ScenarioKind,
    /// Messages to finish.
    pub(crate) messages: u64,
    /// What the handler does.
    pub(crate) behaviour: Behaviour,
    /// The visibility timeout asked for, in seconds; `None` for the queue's own (30 s).
    pub(crate) visibility_secs: Option<u64>,
    /// One message at a time instead of a queue filled up front.
    pub(crate) light: bool,
    /// The latency the embedded server adds to every call during the runs.
    pub(crate) latency: Latency,
    /// Receive-and-delete loops of the raw ceiling.
    pub(crate) ceiling_loops: usize,
    /// A FIFO queue's message groups; `None` for a standard queue.
    pub(crate) fifo_groups: Option<u64>,
}

/// The message groups of the FIFO scenario.
pub(crate) const FIFO_GROUPS: u64 = 100;

impl Scenario {
    /// The scenario `kind` with message counts scaled by `scale` (1.0: 20 000 messages
    /// ack-only), for `workers` handlers at once.
    pub(crate) fn sized(kind: ScenarioKind, scale: f64, workers: usize) -> Self {
        let scaled = |base: f64| ((base * scale).round() as u64).max(10);
        let mut behaviour = Behaviour::default();
        let mut visibility_secs = None;
        let mut light = false;
        let mut fifo_groups = None;
        let messages = match kind {
            ScenarioKind::AckOnly => scaled(20_000.0),
            ScenarioKind::Io5ms => {
                behaviour.delay = Duration::from_millis(5);
                scaled(10_000.0)
            }
            ScenarioKind::Io50ms => {
                behaviour.delay = Duration::from_millis(50);
                scaled(3_000.0)
            }
            ScenarioKind::Mixed => {
                behaviour.retry_after_share = 0.1;
                behaviour.retry_after = Duration::from_secs(1);
                behaviour.drop_share = 0.1;
                scaled(10_000.0)
            }
            ScenarioKind::Heartbeat => {
                behaviour.delay = Duration::from_secs(3);
                visibility_secs = Some(2);
                (workers as u64 * 2).max(10)
            }
            // Enough round trips for a p99 on any target, whatever the scale.
            ScenarioKind::Light => {
                light = true;
                200
            }
            ScenarioKind::Fifo => {
                behaviour.delay = Duration::from_millis(5);
                fifo_groups = Some(FIFO_GROUPS);
                // Short: ruststream-sqs-sns moves some 200 messages a second here.
                scaled(2_000.0)
            }
        };
        Self {
            kind,
            messages,
            behaviour,
            visibility_secs,
            light,
            latency: Latency::None,
            ceiling_loops: 16,
            fifo_groups,
        }
    }

    /// This scenario at `latency`, with `ceiling_loops` loops for the raw ceiling.
    pub(crate) fn at(mut self, latency: Latency, ceiling_loops: usize) -> Self {
        self.latency = latency;
        self.ceiling_loops = ceiling_loops;
        self
    }

    /// How many messages `system` runs: the scenario's count; [`FAST_MESSAGES_AT_LATENCY`]
    /// times as many for the systems that run long at a latency; `slow_scale` of it (at least
    /// ten) for the slow ones (see [`System::runs_slow`]). A light scenario's count is the
    /// same for all.
    pub(crate) fn messages_for(&self, system: System, slow_scale: f64) -> u64 {
        if self.light {
            self.messages
        } else if system.runs_long_at_latency() && !self.latency.is_none() {
            self.messages * FAST_MESSAGES_AT_LATENCY
        } else if system.runs_slow() {
            ((self.messages as f64 * slow_scale).round() as u64).max(10)
        } else {
            self.messages
        }
    }

    /// The scenario's name, with its latency when there is one: `ack-only`,
    /// `ack-only@sqs`.
    pub(crate) fn label(&self) -> String {
        if self.latency.is_none() {
            self.kind.name().to_owned()
        } else {
            format!("{}@{}", self.kind.name(), self.latency.short())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_out_of_range_are_refused() {
        assert_eq!(parse_scale("0.25"), Ok(0.25));
        assert_eq!(parse_scale("100"), Ok(100.0));
        for refused in ["0", "-1", "100.5", "NaN", "inf", "x"] {
            assert!(parse_scale(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn each_system_runs_its_share_of_the_messages() {
        let loopback = Scenario::sized(ScenarioKind::AckOnly, 0.25, 64);
        let at_latency = loopback.clone().at(Latency::SQS, 128);
        assert_eq!(loopback.messages_for(System::SqsEngine, 0.25), 5_000);
        assert_eq!(loopback.messages_for(System::SqsEngineBroker, 0.25), 5_000);
        assert_eq!(loopback.messages_for(System::Naive, 0.25), 1_250);
        assert_eq!(loopback.messages_for(System::RuststreamSqsSns, 0.25), 1_250);
        assert_eq!(loopback.messages_for(System::Naive, 1.0), 5_000);
        assert_eq!(loopback.messages_for(System::Naive, 0.0001), 10, "a floor");
        assert_eq!(at_latency.messages_for(System::Ceiling, 1.0), 40_000);
        assert_eq!(at_latency.messages_for(System::SqsEngine, 1.0), 40_000);
        assert_eq!(
            at_latency.messages_for(System::SqsEngineBroker, 1.0),
            40_000,
            "the broker runs as many as the native API, so that both pass their ramp-up"
        );
        assert_eq!(at_latency.messages_for(System::Naive, 1.0), 5_000);
        let light = Scenario::sized(ScenarioKind::Light, 1.0, 64).at(Latency::SQS, 128);
        assert_eq!(light.messages_for(System::Ceiling, 0.25), 200);
        assert_eq!(light.messages_for(System::Naive, 0.25), 200);
    }

    #[test]
    fn scenarios_scale_but_keep_a_floor() {
        assert_eq!(
            Scenario::sized(ScenarioKind::AckOnly, 1.0, 64).messages,
            20_000
        );
        assert_eq!(
            Scenario::sized(ScenarioKind::AckOnly, 0.25, 64).messages,
            5_000
        );
        assert_eq!(Scenario::sized(ScenarioKind::Light, 0.01, 64).messages, 200);
        assert_eq!(
            Scenario::sized(ScenarioKind::Heartbeat, 0.01, 64).messages,
            128
        );
        assert!(Scenario::sized(ScenarioKind::Light, 1.0, 64).light);
        assert_eq!(
            Scenario::sized(ScenarioKind::Fifo, 1.0, 64).fifo_groups,
            Some(FIFO_GROUPS)
        );
    }
}
