//! [`DistinctKeys`]: a batch never carries one key twice, and an ordered line keeps a key in at
//! most one call at a time.

use std::collections::HashSet;
use std::sync::Arc;

use super::rule::{Admit, Rule};

/// An entry that names what it acts on (a receipt handle).
pub(crate) trait Keyed {
    /// What the entry acts on.
    fn key(&self) -> &Arc<str>;
}

/// The rule of a line whose entries act on keys: a second entry for a key already in the batch
/// waits for the next one. On an ordered line, an entry whose key is in a call in flight also
/// waits for that call to finish, so the entries of one key reach the service in the order
/// they came.
#[derive(Debug)]
pub(crate) struct DistinctKeys {
    /// The keys in calls in flight, on an ordered line.
    busy: Option<HashSet<Arc<str>>>,
}

impl DistinctKeys {
    /// The rule of an ordered line, or of one that only keeps each batch's keys distinct.
    pub(crate) fn new(ordered: bool) -> Self {
        Self {
            busy: ordered.then(HashSet::new),
        }
    }

    fn is_busy(&self, key: &Arc<str>) -> bool {
        self.busy
            .as_ref()
            .is_some_and(|busy| !busy.is_empty() && busy.contains(key))
    }

    /// A call with these keys has finished (whatever its answer).
    pub(crate) fn release<'a>(&mut self, keys: impl IntoIterator<Item = &'a Arc<str>>) {
        if let Some(busy) = &mut self.busy {
            for key in keys {
                busy.remove(key);
            }
        }
    }
}

impl<E: Keyed> Rule<E> for DistinctKeys {
    fn admits(&self, batch: &[E], entry: &E) -> Admit {
        let key = entry.key();
        if self.is_busy(key) || batch.iter().any(|taken| taken.key() == key) {
            Admit::Skip
        } else {
            Admit::Take
        }
    }

    fn ready(&self, entry: &E) -> bool {
        !self.is_busy(entry.key())
    }

    fn sent(&mut self, batch: &[E]) {
        if let Some(busy) = &mut self.busy {
            busy.extend(batch.iter().map(|entry| Arc::clone(entry.key())));
        }
    }
}
