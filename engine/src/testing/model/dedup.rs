//! The deduplication ids a FIFO queue remembers, for the five minutes SQS does.

use std::collections::{HashMap, VecDeque};

use tokio::time::Instant;

use super::rules::DEDUPLICATION_WINDOW;

/// The deduplication ids seen in the last five minutes, each with what the send that first
/// carried it answered (`V`).
#[derive(Debug)]
pub struct Deduplication<V> {
    /// The ids in the window, with the first send's answer.
    seen: HashMap<String, V>,
    /// When each id of `seen` expires, oldest first.
    expiries: VecDeque<(Instant, String)>,
}

impl<V> Default for Deduplication<V> {
    fn default() -> Self {
        Self {
            seen: HashMap::new(),
            expiries: VecDeque::new(),
        }
    }
}

impl<V> Deduplication<V> {
    /// What the first send with `key` in the window answered, as of `now`; `None` when the
    /// key is new.
    pub fn seen(&mut self, key: &str, now: Instant) -> Option<&V> {
        while self
            .expiries
            .front()
            .is_some_and(|(expiry, _)| *expiry <= now)
        {
            if let Some((_, key)) = self.expiries.pop_front() {
                self.seen.remove(&key);
            }
        }
        self.seen.get(key)
    }

    /// Remembers `key`, sent `now`, with the answer of its send.
    pub fn remember(&mut self, key: String, answer: V, now: Instant) {
        self.seen.insert(key.clone(), answer);
        self.expiries.push_back((now + DEDUPLICATION_WINDOW, key));
    }
}
