//! [`FlushReason`]: why a batch went out, the vocabulary the batching core and the metrics
//! share.

/// Why a batch went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FlushReason {
    /// The waiting entries fill a call.
    Full,
    /// No call of its kind was in flight.
    Idle,
    /// The oldest entry had waited its longest.
    Deadline,
    /// Draining for shutdown.
    Shutdown,
}

impl FlushReason {
    pub(crate) const ALL: [FlushReason; 4] = [
        FlushReason::Full,
        FlushReason::Idle,
        FlushReason::Deadline,
        FlushReason::Shutdown,
    ];

    pub(crate) fn index(self) -> usize {
        match self {
            FlushReason::Full => 0,
            FlushReason::Idle => 1,
            FlushReason::Deadline => 2,
            FlushReason::Shutdown => 3,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FlushReason::Full => "full",
            FlushReason::Idle => "idle",
            FlushReason::Deadline => "deadline",
            FlushReason::Shutdown => "shutdown",
        }
    }
}
