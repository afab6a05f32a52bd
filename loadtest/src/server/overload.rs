//! An overloaded server: a fixed number of calls served at once, each costing time that grows
//! with the messages the server holds, as a slow implementation that scans its queues on every
//! call does. It shows what the engine does to an SQS that cannot keep up (see
//! `docs/benchmarks.md`, "An overloaded server").
//!
//! With an [`Overload`] set, an SQS call waits for one of its slots (first come, first served),
//! holds it for [`Overload::per_message`] times the messages on all queues (visible, in flight
//! and delayed), then is applied and releases it; a long poll then waits for messages without
//! a slot. The call runs on a task of its own: a client that gives up on it (its timeout, a
//! closed connection) does not stop it, and a receive applied after the client left hides its
//! messages for their visibility timeout, as a real server's would. SNS calls take no slot.

use std::fmt;
use std::num::NonZeroUsize;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The longest cost a message may add to a call: a typo's thousand seconds would stop the
/// server for good.
const MAX_PER_MESSAGE: Duration = Duration::from_millis(100);

/// How overloaded the server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Overload {
    /// Calls served at once; the rest wait their turn.
    pub slots: NonZeroUsize,
    /// What each message on the server's queues adds to a call's time in its slot.
    #[serde(with = "micros")]
    pub per_message: Duration,
}

impl Overload {
    /// How long a call holds its slot while the server holds `messages` messages.
    pub fn cost(&self, messages: usize) -> Duration {
        self.per_message
            .saturating_mul(u32::try_from(messages).unwrap_or(u32::MAX))
    }
}

impl FromStr for Overload {
    type Err = String;

    /// `SLOTS,MICROS`: calls served at once, and the microseconds each message on the
    /// server's queues adds to a call (`1,50`: one call at a time, 100 ms a call at 2,000
    /// messages).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = || {
            format!(
                "`{text}` is not an overload: `SLOTS,MICROS` (calls served at once, at least 1, \
                 and the microseconds each message held adds to a call, at most {}), e.g. `1,50`",
                MAX_PER_MESSAGE.as_micros()
            )
        };
        let (slots, micros) = text.split_once(',').ok_or_else(usage)?;
        let slots = slots.trim().parse::<NonZeroUsize>().map_err(|_| usage())?;
        let micros = micros.trim().parse::<u64>().map_err(|_| usage())?;
        let per_message = Duration::from_micros(micros);
        if per_message > MAX_PER_MESSAGE {
            return Err(usage());
        }
        Ok(Self { slots, per_message })
    }
}

impl fmt::Display for Overload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} call(s) at once, {} µs a call per message held",
            self.slots,
            self.per_message.as_micros()
        )
    }
}

/// The overload in force, if any, and its slots.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// The overload and the semaphore of its slots; `None`: calls are served at once.
    active: Mutex<Option<(Overload, Arc<Semaphore>)>>,
}

impl Gate {
    /// Sets the overload of calls arriving from now on (`None`: none). Calls already holding
    /// or awaiting a slot keep the old one.
    pub(crate) fn set(&self, overload: Option<Overload>) {
        *self.active.lock().unwrap_or_else(PoisonError::into_inner) =
            overload.map(|overload| (overload, Arc::new(Semaphore::new(overload.slots.get()))));
    }

    /// The overload in force.
    pub(crate) fn overload(&self) -> Option<Overload> {
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|(overload, _)| *overload)
    }

    /// Waits for a slot and holds it for the cost at `messages()` messages (read once the slot
    /// is taken); `None` at once when the server is not overloaded. The slot is free again when
    /// the returned permit drops.
    ///
    /// # Cancel safety
    ///
    /// Cancelling gives up the place in line, or the slot.
    pub(crate) async fn turn(
        &self,
        messages: impl FnOnce() -> usize,
    ) -> Option<OwnedSemaphorePermit> {
        let (overload, slots) = {
            let active = self.active.lock().unwrap_or_else(PoisonError::into_inner);
            let (overload, slots) = active.as_ref()?;
            (*overload, Arc::clone(slots))
        };
        // The semaphore is never closed.
        let permit = slots.acquire_owned().await.ok()?;
        tokio::time::sleep(overload.cost(messages())).await;
        Some(permit)
    }
}

/// `per_message` in JSON: whole microseconds.
mod micros {
    use std::time::Duration;

    use serde::Serializer;

    pub(super) fn serialize<S: Serializer>(
        duration: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_u128(duration.as_micros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_slots_and_micros() {
        let overload: Overload = "2, 50".parse().expect("valid");
        assert_eq!(overload.slots.get(), 2);
        assert_eq!(overload.per_message, Duration::from_micros(50));
        assert_eq!(overload.cost(2_000), Duration::from_millis(100));
    }

    #[test]
    fn refuses_no_slots_a_missing_part_and_an_absurd_cost() {
        for text in ["0,50", "1", "1,x", "1,100001", "-1,5"] {
            let error = text.parse::<Overload>().expect_err(text);
            assert!(error.contains("SLOTS,MICROS"), "{text}: {error}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn one_slot_serves_calls_one_after_the_other_for_their_cost() {
        let gate = Arc::new(Gate::default());
        gate.set(Some("1,1000".parse().expect("valid")));
        let start = tokio::time::Instant::now();
        let calls: Vec<_> = (0..3)
            .map(|_| {
                let gate = Arc::clone(&gate);
                tokio::spawn(async move {
                    let permit = gate.turn(|| 100).await;
                    assert!(permit.is_some());
                    start.elapsed()
                })
            })
            .collect();
        let mut done = Vec::new();
        for call in calls {
            done.push(call.await.expect("no panic"));
        }
        done.sort();
        // 100 messages at 1 ms each: 100 ms a call, one at a time.
        assert_eq!(
            done,
            [100, 200, 300].map(Duration::from_millis).to_vec(),
            "each call waits for the one before it"
        );
    }

    #[tokio::test]
    async fn without_an_overload_a_call_takes_no_slot() {
        let gate = Gate::default();
        assert!(gate.turn(|| 1_000_000).await.is_none());
        gate.set(Some("1,0".parse().expect("valid")));
        gate.set(None);
        assert!(gate.turn(|| 1_000_000).await.is_none());
        assert_eq!(gate.overload(), None);
    }
}
