//! Duplicate deliveries on standard queues: SQS's at-least-once delivery, which may hand a
//! message out again while a consumer still holds it, switched on for a test with a chance
//! and a seed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use super::InProcessSqs;
use super::model::Received;
use super::queue::{Entry, Queue};

/// How often a receive on a standard queue hands a message in flight out again, and the
/// draws that decide it.
pub(super) struct Duplicates {
    chance: f64,
    rng: fastrand::Rng,
}

impl InProcessSqs {
    /// From now on, each receive on a standard queue that has room left in its answer hands
    /// out, with probability `chance`, one message already in flight a second time: a new
    /// receipt handle (its receive count one more), while the receipt handle that holds it
    /// keeps naming it. Either handle deletes the message or changes its visibility; it stays
    /// hidden until the later of the two visibility deadlines. The journal notes the receive
    /// as a duplicate. FIFO queues are never affected: they deliver exactly once. The draws
    /// come from `seed` alone, in the order receives are made.
    ///
    /// A `chance` outside `0.0..=1.0` is taken as the nearest bound.
    pub fn duplicate_deliveries(&self, chance: f64, seed: u64) {
        let chance = if chance.is_nan() {
            0.0
        } else {
            chance.clamp(0.0, 1.0)
        };
        self.shared.lock().duplicates = Some(Duplicates {
            chance,
            rng: fastrand::Rng::with_seed(seed),
        });
    }
}

impl Duplicates {
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
