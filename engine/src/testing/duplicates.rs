//! Duplicate deliveries on standard queues: SQS's at-least-once delivery, which may hand a
//! message out again while a consumer still holds it. A test switches them on with a chance
//! and a seed ([`InProcessSqs::duplicate_deliveries`](super::InProcessSqs::duplicate_deliveries));
//! the draws are made here.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use super::model::Received;
use super::queue::{Entry, Queue};

/// How often a receive on a standard queue hands a message in flight out again, and the
/// draws that decide it.
pub(super) struct Duplicates {
    chance: f64,
    rng: fastrand::Rng,
}

impl Duplicates {
    /// Hands out a message in flight again with probability `chance` (taken as the nearest
    /// bound outside `0.0..=1.0`), drawing from `seed` alone.
    pub(super) fn new(chance: f64, seed: u64) -> Self {
        let chance = if chance.is_nan() {
            0.0
        } else {
            chance.clamp(0.0, 1.0)
        };
        Self {
            chance,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// The message of `queue` a receive at `now` hands out again, hidden until `deadline`,
    /// if the draw says so: one of those in flight, not among the `taken` this receive
    /// handed out.
    pub(super) fn draw(
        &mut self,
        queue: &mut Queue,
        now: Instant,
        deadline: Instant,
        taken: &[Received<Entry>],
    ) -> Option<Received<Entry>> {
        if queue.fifo || self.chance <= 0.0 || self.rng.f64() >= self.chance {
            return None;
        }
        let candidates: Vec<u64> = queue
            .messages
            .in_flight_seqs()
            .into_iter()
            .filter(|seq| taken.iter().all(|taken| taken.seq != *seq))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let seq = candidates[self.rng.usize(..candidates.len())];
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis();
        queue.messages.hand_out_again(
            seq,
            now,
            deadline,
            u64::try_from(millis).unwrap_or(u64::MAX),
        )
    }
}
