//! The two batch calls a settlement goes out in: the vocabulary the settlement state and the
//! metrics share (a leaf module: it imports nothing of the crate).

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
