//! The room of one queue's consumer, shared: the receivers wait in it, and what they took is
//! held by guards that give it back when dropped (a delivery's slot when its settlement is
//! answered, its bytes when its handler is done). The decisions are [`Room`]'s.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, ready};

use tokio::sync::oneshot;

use crate::metrics::QueueMetrics;
use crate::room::state::{Freed, Room, Waiter};

impl Waiter for oneshot::Sender<()> {
    fn wake(self) -> bool {
        self.send(()).is_ok()
    }

    fn gone(&self) -> bool {
        self.is_closed()
    }
}

/// The room of one queue's consumer (see [`Room`]), with the gauge of the bytes held.
pub(crate) struct HeldRoom {
    state: Mutex<Room<oneshot::Sender<()>>>,
    metrics: Arc<QueueMetrics>,
}

impl HeldRoom {
    /// Room for `slots` messages held, `kib` KiB of them and `ahead` messages received and not
    /// yet handed out, asked for `batch` messages at a time (see [`Room::new`]).
    pub(crate) fn new(
        slots: usize,
        kib: usize,
        ahead: usize,
        batch: usize,
        metrics: Arc<QueueMetrics>,
    ) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(Room::new(slots, kib, ahead, batch)),
            metrics,
        })
    }

    /// The state, locked: plain data, and no code under the lock panics (a waiter's wake sends
    /// on a channel).
    fn lock(&self) -> MutexGuard<'_, Room<oneshot::Sender<()>>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn free(&self, freed: Freed) {
        self.lock().free(freed);
    }

    /// Waits for a receive batch's room in the prefetch and among the messages held, in turn
    /// with the other receivers.
    ///
    /// # Cancel safety
    ///
    /// Dropped before it returns, it takes nothing: room taken for it meanwhile goes back.
    pub(crate) async fn batch(self: &Arc<Self>) -> BatchRoom {
        let (tx, rx) = oneshot::channel();
        let (asked, batch) = {
            let mut state = self.lock();
            (state.ask_batch(tx), state.batch())
        };
        let freed = Freed {
            slots: batch,
            ahead: batch,
            kib: 0,
        };
        if asked.is_none() {
            Granted::new(rx, Arc::clone(self), freed).await;
        }
        BatchRoom {
            held: Arc::clone(self),
            slots: batch,
            ahead: batch,
        }
    }

    /// Waits for `wanted` KiB among the bytes held (all of them at the most), in turn with the
    /// other receives.
    ///
    /// # Cancel safety
    ///
    /// Dropped before it returns, it takes nothing: room taken for it meanwhile goes back.
    pub(crate) async fn kib(self: &Arc<Self>, wanted: usize) -> KibRoom {
        let (tx, rx) = oneshot::channel();
        let (asked, kib) = {
            let mut state = self.lock();
            let kib = state.kib_for(wanted);
            (state.ask_kib(tx, kib), kib)
        };
        if asked.is_none() {
            let freed = Freed {
                kib,
                ..Freed::default()
            };
            Granted::new(rx, Arc::clone(self), freed).await;
        }
        KibRoom {
            held: Arc::clone(self),
            kib,
        }
    }

    /// `count` messages received left the prefetch (handed out, or returned to the queue).
    pub(crate) fn left_prefetch(&self, count: usize) {
        self.free(Freed {
            ahead: count,
            ..Freed::default()
        });
    }

    /// Room for how many receive batches the prefetch has now.
    pub(crate) fn ahead_batches(&self) -> usize {
        self.lock().ahead_batches()
    }

    /// How much of each kind is taken now.
    #[cfg(test)]
    pub(crate) fn taken(&self) -> Freed {
        self.lock().taken()
    }
}

/// Waits for a grant, and gives the room back if dropped once it came.
struct Granted {
    rx: Option<oneshot::Receiver<()>>,
    held: Arc<HeldRoom>,
    /// The room asked for.
    asked: Freed,
}

impl Granted {
    fn new(rx: oneshot::Receiver<()>, held: Arc<HeldRoom>, asked: Freed) -> Self {
        Self {
            rx: Some(rx),
            held,
            asked,
        }
    }
}

impl Future for Granted {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(rx) = self.rx.as_mut() else {
            return Poll::Ready(());
        };
        // The sender is only dropped unsent with the state, which outlives every waiter.
        ready!(Pin::new(rx).poll(cx)).ok();
        self.rx = None;
        Poll::Ready(())
    }
}

impl Drop for Granted {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            // No grant can come after the close; one that came before is in the channel.
            rx.close();
            let granted = rx.try_recv().is_ok();
            // Ungranted, it still stands in line: let through whoever it held up.
            self.held.free(if granted {
                self.asked
            } else {
                Freed::default()
            });
        }
    }
}

/// A receive batch's room in the prefetch and among the messages held, taken before the call:
/// what is not handed on is given back when this is dropped.
pub(crate) struct BatchRoom {
    held: Arc<HeldRoom>,
    slots: usize,
    ahead: usize,
}

impl BatchRoom {
    /// A received message's slot, out of the batch's: given back when the slot is dropped.
    pub(crate) fn slot(&mut self) -> Slot {
        debug_assert!(self.slots > 0, "more messages than a receive batch");
        self.slots = self.slots.saturating_sub(1);
        Slot(Arc::clone(&self.held))
    }

    /// Gives back the slots not taken by [`slot`](Self::slot) yet.
    pub(crate) fn free_slots(&mut self) {
        let slots = std::mem::take(&mut self.slots);
        self.held.free(Freed {
            slots,
            ..Freed::default()
        });
    }

    /// Gives back the batch's room in the prefetch, for a receive whose messages go back to
    /// the queue at once.
    pub(crate) fn free_ahead(&mut self) {
        let ahead = std::mem::take(&mut self.ahead);
        self.held.free(Freed {
            ahead,
            ..Freed::default()
        });
    }

    /// Keeps `count` of the batch's room in the prefetch for messages received and handed on:
    /// given back by [`HeldRoom::left_prefetch`] as they leave it.
    pub(crate) fn keep_ahead(&mut self, count: usize) {
        debug_assert!(count <= self.ahead, "more messages than a receive batch");
        self.ahead = self.ahead.saturating_sub(count);
    }
}

impl Drop for BatchRoom {
    fn drop(&mut self) {
        if self.slots > 0 || self.ahead > 0 {
            self.held.free(Freed {
                slots: self.slots,
                ahead: self.ahead,
                kib: 0,
            });
        }
    }
}

/// A message's place among the messages held: given back when dropped (with its settlement's
/// answer, or with its delivery unsettled).
pub(crate) struct Slot(Arc<HeldRoom>);

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Slot")
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.free(Freed {
            slots: 1,
            ..Freed::default()
        });
    }
}

/// A receive's messages' room among the bytes held, taken after the call: shared out to the
/// deliveries as [`BodyRoom`]s; what is left is given back when this is dropped.
pub(crate) struct KibRoom {
    held: Arc<HeldRoom>,
    kib: usize,
}

impl KibRoom {
    /// `kib` of the room (what is left, at the most) for one message; `None` when none is
    /// left.
    pub(crate) fn body(&mut self, kib: usize) -> Option<BodyRoom> {
        let kib = kib.min(self.kib);
        if kib == 0 {
            return None;
        }
        self.kib -= kib;
        Some(BodyRoom::new(Arc::clone(&self.held), kib))
    }
}

impl Drop for KibRoom {
    fn drop(&mut self) {
        if self.kib > 0 {
            self.held.free(Freed {
                kib: self.kib,
                ..Freed::default()
            });
        }
    }
}

/// A message's share of the bytes held, in KiB: given back, and taken off the held-bytes
/// gauge, when the message is settled or dropped (its handler has the message by then, or it
/// is gone).
pub(crate) struct BodyRoom {
    held: Arc<HeldRoom>,
    kib: usize,
}

impl BodyRoom {
    /// `kib` taken already, counted on the gauge until this is dropped.
    fn new(held: Arc<HeldRoom>, kib: usize) -> Self {
        held.metrics.held_bytes(kib_as_bytes(kib));
        Self { held, kib }
    }
}

fn kib_as_bytes(kib: usize) -> f64 {
    kib as f64 * 1024.0
}

impl Drop for BodyRoom {
    fn drop(&mut self) {
        self.held.metrics.held_bytes(-kib_as_bytes(self.kib));
        self.held.free(Freed {
            kib: self.kib,
            ..Freed::default()
        });
    }
}

#[cfg(test)]
mod tests;
