//! The two batch calls a settlement goes out in, and why a batch went out: the vocabulary the
//! settlement state and the metrics share (a leaf module: it imports nothing of the crate).

/// Which batch call an entry goes out in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Lane {
    /// `DeleteMessageBatch`.
    Delete,
    /// `ChangeMessageVisibilityBatch`.
    Visibility,
}

impl Lane {
    pub(crate) const ALL: [Lane; 2] = [Lane::Delete, Lane::Visibility];

    pub(crate) fn index(self) -> usize {
        match self {
            Lane::Delete => 0,
            Lane::Visibility => 1,
        }
    }
}

/// Why a batch went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FlushReason {
    Full,
    Idle,
    Deadline,
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
