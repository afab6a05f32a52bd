//! What keeps a queue's settlement open: a [`Hold`] on its [`Holds`].
//!
//! Every delivery not yet settled holds its queue's settlement open, and so do the consumer that
//! hands the deliveries out and the consumer's owner until it lets go. When the last hold is
//! released (and the long polls the receivers finished on the side have answered), the
//! settlement drains: it sends what is pending, waits for SQS's answers and stops. So a settlement made by anyone still holding a delivery, or a message returned by a
//! consumer as it is dropped, always finds the settlement open, whatever order the holders go
//! in.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio_util::sync::CancellationToken;

/// The holds on one queue's settlement, and the signal that the last one went.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    count: AtomicUsize,
    released: CancellationToken,
}

impl Holds {
    /// Cancelled once the last hold is released; never before the first hold is taken.
    pub(crate) fn released(&self) -> &CancellationToken {
        &self.released
    }
}

/// One hold on a queue's settlement, released when dropped. Dropping never awaits: safe from
/// `Drop`.
#[derive(Debug)]
pub(crate) struct Hold(Arc<Holds>);

impl Hold {
    /// Takes a hold on `holds`. A hold taken after the last one went does not reopen the
    /// settlement: it drains all the same.
    pub(crate) fn new(holds: &Arc<Holds>) -> Self {
        holds.count.fetch_add(1, Ordering::AcqRel);
        Self(Arc::clone(holds))
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.released.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settlement_is_released_when_the_last_hold_goes_whatever_the_order() {
        let holds = Arc::new(Holds::default());
        let owner = Hold::new(&holds);
        let consumer = Hold::new(&holds);
        let delivery = Hold::new(&holds);
        drop(owner);
        assert!(!holds.released().is_cancelled(), "two holds left");
        drop(consumer);
        assert!(
            !holds.released().is_cancelled(),
            "a delivery still holds it"
        );
        let another = Hold::new(&holds);
        drop(delivery);
        assert!(!holds.released().is_cancelled(), "one delivery left");
        drop(another);
        assert!(holds.released().is_cancelled(), "the last hold went");
    }
}
