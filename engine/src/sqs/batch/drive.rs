//! [`drive`]: the one loop that runs a batching state. At each turn it asks the state (under
//! its lock, with `now`) for the batches due, hands each to its call, and sleeps until the
//! state's next deadline or a wake-up; it returns once the state is done. Settlement's lanes and the publisher's destinations both run on it.

use std::future::Future;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::sqs::sleep::sleep_until_or_forever;

/// What a batching state answers at one turn of [`drive`].
#[derive(Debug)]
pub(crate) struct Due<B> {
    /// The batches that go out now.
    pub(crate) batches: Vec<B>,
    /// When the next one may fall due without a wake-up; `None`: only a wake-up brings one.
    pub(crate) next: Option<Instant>,
    /// Whether the state is done: nothing waits, and nothing more will come.
    pub(crate) done: bool,
}

/// A batching state and its calls, as [`drive`] runs them.
pub(crate) trait Driven: Sync {
    /// A batch that goes out in one call.
    type Batch;

    /// The batches due at `now`, taken under the state's lock.
    fn poll(&self, now: Instant) -> Due<Self::Batch>;

    /// Starts the call of `batch`, on a task of its own: the loop does not wait for it.
    fn send(&self, batch: Self::Batch);

    /// Notified when something new may be due: a push, an answer, a drain.
    fn wake(&self) -> &Notify;

    /// After a wake-up, before the next turn; nothing by default.
    fn after_wake(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Runs `driven` until its state is done (see the module's documentation).
///
/// # Cancel safety
///
/// Dropped between turns, no batch is lost that was taken: each was handed to its call at the
/// turn that took it.
pub(crate) async fn drive<D: Driven>(driven: &D) {
    loop {
        let due = driven.poll(Instant::now());
        for batch in due.batches {
            driven.send(batch);
        }
        if due.done {
            return;
        }
        // Biased: every branch only loops back, and a fixed order keeps a run on a paused clock
        // the same from one seed to the next.
        tokio::select! {
            biased;
            () = driven.wake().notified() => driven.after_wake().await,
            () = sleep_until_or_forever(due.next) => {}
        }
    }
}
