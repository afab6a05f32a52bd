//! The systems compared: which there are, and what each does that the comparison plans
//! around. How each runs is in `systems`.

use serde::{Deserialize, Serialize};

/// A system under comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum System {
    /// sqs-engine's native API (`Engine::run`).
    SqsEngine,
    /// sqs-engine's own RustStream broker (feature `ruststream`), the same minimal service as
    /// `ruststream-sqs-sns`'s.
    SqsEngineBroker,
    /// `ruststream-sqs-sns` 0.7, a minimal service with one subscriber.
    RuststreamSqsSns,
    /// A hand-written `aws-sdk-sqs` loop: receive ten, delete each one by one.
    Naive,
    /// Receive ten and `DeleteMessageBatch` them, in tight loops, with no handler.
    Ceiling,
}

impl System {
    /// Every system, in the order of the first repetition (the next one runs them in reverse).
    /// sqs-engine and the raw ceiling come first, back to back, so that the ratio of the two
    /// (which the CI gate checks) compares runs made moments apart, under the same load on the
    /// machine, rather than a minute apart with the slow systems in between.
    pub(crate) const ALL: [System; 5] = [
        System::SqsEngine,
        System::Ceiling,
        System::SqsEngineBroker,
        System::RuststreamSqsSns,
        System::Naive,
    ];

    /// A short, stable name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::SqsEngine => "sqs-engine",
            Self::SqsEngineBroker => "sqs-engine-broker",
            Self::RuststreamSqsSns => "ruststream-sqs-sns",
            Self::Naive => "naive",
            Self::Ceiling => "ceiling",
        }
    }

    /// Whether it keeps messages invisible while slow handlers run. Systems without one
    /// never finish a scenario whose handlers outlast the visibility timeout, so they sit it
    /// out.
    pub(crate) fn has_heartbeat(self) -> bool {
        matches!(
            self,
            Self::SqsEngine | Self::SqsEngineBroker | Self::RuststreamSqsSns
        )
    }

    /// Whether it runs [`FAST_MESSAGES_AT_LATENCY`](super::FAST_MESSAGES_AT_LATENCY) times
    /// the scenario's messages at a latency: the raw ceiling (a hundred loops or more) and
    /// sqs-engine, its native API and its broker alike (its receivers grow to the round trip,
    /// so the scenario's count would measure their ramp-up, and the broker is compared with
    /// the native API on the same count). The others move a few thousand messages a second at
    /// most there and run the scenario's count, which keeps the comparison short.
    pub(crate) fn runs_long_at_latency(self) -> bool {
        matches!(
            self,
            Self::Ceiling | Self::SqsEngine | Self::SqsEngineBroker
        )
    }

    /// Whether `--slow-scale` sizes its runs: the systems that settle one message per call
    /// (the naive loop, ruststream-sqs-sns), which move a few hundred messages a second on a
    /// slow server.
    pub(crate) fn runs_slow(self) -> bool {
        matches!(self, Self::Naive | Self::RuststreamSqsSns)
    }

    /// Whether it runs the FIFO scenario: the systems that keep a group's order. The raw
    /// ceiling has no handler, so no order to check, and the naive loop is left out to keep
    /// the comparison short: its order would be the server's alone (each receive handled one
    /// message after another).
    pub(crate) fn runs_fifo(self) -> bool {
        matches!(
            self,
            Self::SqsEngine | Self::SqsEngineBroker | Self::RuststreamSqsSns
        )
    }
}
