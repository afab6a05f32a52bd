//! The SQS calls a system counts itself, by action.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// SQS calls by action name.
pub(crate) type Calls = BTreeMap<String, u64>;

/// Calls counted by action, shared by a system's loops.
#[derive(Debug, Default)]
pub(crate) struct CallCounter(Mutex<Calls>);

impl CallCounter {
    /// Counts one call of `action`.
    pub(crate) fn add(&self, action: &str) {
        if let Ok(mut calls) = self.0.lock() {
            match calls.get_mut(action) {
                Some(count) => *count += 1,
                None => {
                    calls.insert(action.to_owned(), 1);
                }
            }
        }
    }

    /// The counts so far.
    pub(crate) fn snapshot(&self) -> Calls {
        self.0.lock().map(|calls| calls.clone()).unwrap_or_default()
    }
}
