//! [`ByteBudget`]: the entries of a call stay within a byte budget, and a larger entry goes
//! alone.

use super::rule::{Admit, Rule};

/// An entry with a size.
pub(crate) trait Weighed {
    /// The bytes the entry adds to a call.
    fn bytes(&self) -> usize;
}

/// The rule of a line whose calls carry at most so many bytes: an entry that would take the
/// batch past the budget waits for the next call, and so does every entry behind it; an entry
/// larger than the budget goes alone. Waiting entries that reach the budget fill a call.
#[derive(Debug)]
pub(crate) struct ByteBudget {
    max_bytes: usize,
    /// The bytes of the waiting entries.
    pending: usize,
}

impl ByteBudget {
    /// A budget of `max_bytes` per call.
    pub(crate) fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            pending: 0,
        }
    }

    /// The budget per call.
    pub(crate) fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Lowers the budget per call to `max_bytes` (never raises it).
    pub(crate) fn lower(&mut self, max_bytes: usize) {
        self.max_bytes = self.max_bytes.min(max_bytes);
    }
}

impl<E: Weighed> Rule<E> for ByteBudget {
    fn admits(&self, batch: &[E], entry: &E) -> Admit {
        let taken: usize = batch.iter().map(Weighed::bytes).sum();
        if batch.is_empty() || taken + entry.bytes() <= self.max_bytes {
            Admit::Take
        } else {
            Admit::Stop
        }
    }

    fn is_full(&self) -> bool {
        self.pending >= self.max_bytes
    }

    fn pushed(&mut self, entry: &E) {
        self.pending += entry.bytes();
    }

    fn left(&mut self, entry: &E) {
        self.pending -= entry.bytes();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::limits::MAX_BATCH_ENTRIES;
    use crate::sqs::batch::{BatchConfig, Batcher, Queued};

    #[derive(Debug, PartialEq, Eq)]
    struct Item {
        token: u32,
        bytes: usize,
        since: Instant,
    }

    impl Queued for Item {
        fn enqueued_at(&self) -> Instant {
            self.since
        }
    }

    impl Weighed for Item {
        fn bytes(&self) -> usize {
            self.bytes
        }
    }

    fn batcher() -> Batcher<Item, ByteBudget> {
        Batcher::new(
            BatchConfig {
                max_batch: MAX_BATCH_ENTRIES,
                max_wait: Duration::from_millis(5),
                max_in_flight: 2,
            },
            ByteBudget::new(100),
        )
    }

    fn item(token: u32, bytes: usize, since: Instant) -> Item {
        Item {
            token,
            bytes,
            since,
        }
    }

    /// Offers an entry as a publish does: refused once draining.
    fn push(
        b: &mut Batcher<Item, ByteBudget>,
        token: u32,
        bytes: usize,
        now: Instant,
    ) -> Result<bool, u32> {
        b.offer(item(token, bytes, now))
            .map_err(|refused| refused.token)
    }

    fn poll(b: &mut Batcher<Item, ByteBudget>, now: Instant) -> Option<Vec<u32>> {
        b.poll(now)
            .map(|(_, entries)| entries.iter().map(|e| e.token).collect())
    }

    #[test]
    fn a_lone_entry_goes_at_once_when_no_call_is_in_flight() {
        let now = Instant::now();
        let mut b = batcher();
        assert_eq!(push(&mut b, 1, 1, now), Ok(true));
        assert_eq!(poll(&mut b, now), Some(vec![1]));
        assert_eq!(poll(&mut b, now), None);
    }

    #[test]
    fn entries_wait_for_company_while_a_call_is_in_flight() {
        let now = Instant::now();
        let mut b = batcher();
        push(&mut b, 1, 1, now).expect("open");
        assert!(poll(&mut b, now).is_some());
        push(&mut b, 2, 1, now).expect("open");
        push(&mut b, 3, 1, now).expect("open");
        assert_eq!(poll(&mut b, now), None, "not due yet");
        assert_eq!(b.next_deadline(), Some(now + Duration::from_millis(5)));
        let later = now + Duration::from_millis(5);
        assert_eq!(poll(&mut b, later), Some(vec![2, 3]));
    }

    #[test]
    fn ten_waiting_entries_go_out_without_waiting() {
        let now = Instant::now();
        let mut b = batcher();
        push(&mut b, 0, 1, now).expect("open");
        assert!(poll(&mut b, now).is_some());
        for i in 1..=11 {
            push(&mut b, i, 1, now).expect("open");
        }
        assert_eq!(poll(&mut b, now), Some((1..=10).collect()));
        // Two calls in flight: the eleventh waits for one to finish.
        assert_eq!(poll(&mut b, now + Duration::from_secs(1)), None);
        b.finish();
        assert_eq!(poll(&mut b, now + Duration::from_secs(1)), Some(vec![11]));
    }

    #[test]
    fn a_batch_stays_within_the_byte_budget() {
        let now = Instant::now();
        let mut b = batcher();
        push(&mut b, 1, 60, now).expect("open");
        push(&mut b, 2, 60, now).expect("open");
        push(&mut b, 3, 200, now).expect("open");
        assert_eq!(poll(&mut b, now), Some(vec![1]));
        assert_eq!(poll(&mut b, now), Some(vec![2]), "over budget: full");
        b.finish();
        assert_eq!(poll(&mut b, now), Some(vec![3]), "too large: alone");
    }

    #[test]
    fn draining_sends_everything_and_refuses_more() {
        let now = Instant::now();
        let mut b = batcher();
        push(&mut b, 1, 1, now).expect("open");
        assert!(poll(&mut b, now).is_some());
        push(&mut b, 2, 1, now).expect("open");
        b.drain();
        assert_eq!(push(&mut b, 3, 1, now), Err(3));
        assert_eq!(poll(&mut b, now), Some(vec![2]));
        assert!(!b.is_done());
        b.finish();
        b.finish();
        assert!(b.is_done());
    }
}
