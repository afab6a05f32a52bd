//! The double itself: its shared state, its queues' inspection for tests, and the wake-ups
//! that make a message receivable when its time comes.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::duplicates::Duplicates;
use super::journal::Applied;
use super::model::Standing;
use super::receipt::Receipt;
use super::sent::SentMessage;
use super::store::State;
use crate::api::{CallError, SendEntry};
use crate::queue_url::last_segment;

/// An in-process SQS on tokio's clock. Clones share the same queues.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use sqs_engine::testing::InProcessSqs;
///
/// let sqs = InProcessSqs::new();
/// sqs.send("orders", "{\"id\":1}").expect("sent");
/// assert_eq!(sqs.counts("orders").visible, 1);
/// # }
/// ```
#[derive(Clone, Default)]
pub struct InProcessSqs {
    pub(super) shared: Arc<Shared>,
}

impl fmt::Debug for InProcessSqs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("InProcessSqs")
            .field("queues", &state.queues.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
pub(super) struct Shared {
    state: Mutex<State>,
    /// Woken whenever a message may have become receivable.
    pub(super) arrived: Notify,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The counts of one queue, as `ApproximateNumberOfMessages*` would give them, but exact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueCounts {
    /// Messages that can be received now (on a FIFO queue, including those held behind a
    /// message of their group in flight).
    pub visible: usize,
    /// Messages received and not yet deleted or visible again.
    pub in_flight: usize,
    /// Messages not yet visible after a send with a delay.
    pub delayed: usize,
}

impl InProcessSqs {
    /// An SQS with no queues yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// An SQS with no queues yet that keeps a journal of every change it applies (see
    /// [`journal`](Self::journal)). The journal grows for as long as the SQS lives: for tests.
    pub fn journaled() -> Self {
        let sqs = Self::default();
        sqs.shared.lock().journal = Some(Vec::new());
        sqs
    }

    /// How many changes the journal holds: a position in it, to tell what happened before a
    /// moment of a test. Zero without a journal.
    pub fn journal_len(&self) -> usize {
        self.shared.lock().journal.as_ref().map_or(0, Vec::len)
    }

    /// The changes applied from position `from` of the journal on, in the order applied.
    pub fn journal_since(&self, from: usize) -> Vec<Applied> {
        self.shared
            .lock()
            .journal
            .as_ref()
            .and_then(|journal| journal.get(from..))
            .map(<[Applied]>::to_vec)
            .unwrap_or_default()
    }

    /// Every change applied, in order; empty unless made [`journaled`](Self::journaled).
    pub fn journal(&self) -> Vec<Applied> {
        self.journal_since(0)
    }

    /// The receipt handles of the messages of `queue` (a name or URL) in flight now: received,
    /// not deleted, and still hidden by that receive (the newest handle of each, and the older
    /// ones a duplicate delivery left naming it).
    pub fn in_flight_receipts(&self, queue: &str) -> Vec<String> {
        let mut state = self.shared.lock();
        let Some(queue) = state.queues.get_mut(last_segment(queue)) else {
            return Vec::new();
        };
        queue.messages.release_due(Instant::now());
        queue
            .messages
            .in_send_order()
            .into_iter()
            .filter(|message| message.standing == Standing::InFlight)
            .flat_map(|message| {
                let counts = message.duplicated.iter().copied();
                counts
                    .chain(std::iter::once(message.receive_count))
                    .map(move |receive_count| {
                        Receipt {
                            message_id: &message.data.id,
                            seq: message.seq,
                            receive_count,
                        }
                        .to_string()
                    })
            })
            .collect()
    }

    /// Sends a message with no attributes to the queue `queue` (a name or URL), creating the
    /// queue when it is new. On a FIFO queue the message goes to group `default` with a fresh
    /// deduplication id.
    ///
    /// # Errors
    ///
    /// What SQS answers for the same send: a body it refuses, a queue name it refuses.
    pub fn send(&self, queue: &str, body: &str) -> Result<String, CallError> {
        let fifo = queue.ends_with(".fifo");
        let next = self.shared.lock().next_id;
        let entry = SendEntry {
            body: body.to_owned(),
            attributes: Vec::new(),
            group_id: fifo.then(|| "default".to_owned()),
            deduplication_id: fifo.then(|| format!("send-{next}")),
        };
        self.send_entry(queue, &entry)
    }

    /// Sends one entry to the queue `queue` (a name or URL), creating the queue when it is new:
    /// what `SendMessage` does, on the caller's thread with no awaiting.
    ///
    /// # Errors
    ///
    /// What SQS answers for the same send (see the [module docs](crate::testing)).
    pub fn send_entry(&self, queue: &str, entry: &SendEntry) -> Result<String, CallError> {
        let name = last_segment(queue);
        let mut state = self.shared.lock();
        self.send_locked(&mut state, name, entry)
    }

    /// [`send_entry`](Self::send_entry) under the lock the caller holds.
    pub(super) fn send_locked(
        &self,
        state: &mut State,
        name: &str,
        entry: &SendEntry,
    ) -> Result<String, CallError> {
        let delay = state.queue_or_create(name)?.delay;
        let id = state.send(name, entry)?;
        if delay > 0 {
            self.wake_after(state, name, Duration::from_secs(u64::from(delay)));
        }
        self.refresh(state, name);
        Ok(id)
    }

    /// The counts of `queue` (a name or URL); all zero for a queue that does not exist.
    pub fn counts(&self, queue: &str) -> QueueCounts {
        let mut state = self.shared.lock();
        let Some(queue) = state.queues.get_mut(last_segment(queue)) else {
            return QueueCounts::default();
        };
        queue.messages.release_due(Instant::now());
        let counts = queue.messages.counts();
        QueueCounts {
            visible: counts.visible,
            in_flight: counts.in_flight,
            delayed: counts.delayed,
        }
    }

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
        self.shared.lock().duplicates = Some(Duplicates::new(chance, seed));
    }

    /// Every message sent to `queue` (a name or URL), or moved to it as its dead-letter queue,
    /// in the order it arrived, deduplicated FIFO sends left out; empty for a queue that does
    /// not exist.
    pub fn sent(&self, queue: &str) -> Vec<SentMessage> {
        self.shared
            .lock()
            .queues
            .get(last_segment(queue))
            .map(|queue| queue.sent.clone())
            .unwrap_or_default()
    }

    /// The bodies of the messages `queue` holds, received or not, in send order.
    pub fn bodies(&self, queue: &str) -> Vec<String> {
        self.shared
            .lock()
            .queues
            .get(last_segment(queue))
            .map(|queue| {
                queue
                    .messages
                    .in_send_order()
                    .into_iter()
                    .map(|message| message.data.body.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Makes visible what is due, counts what became receivable on a watched queue, and wakes
    /// the receivers.
    pub(super) fn refresh(&self, state: &mut State, name: &str) {
        let observer = state.observer.clone();
        let Some(queue) = state.queues.get_mut(name) else {
            return;
        };
        queue.messages.release_due(Instant::now());
        if let Some(observer) = &observer
            && !queue.watchers.is_empty()
        {
            queue.messages.for_each_receivable(|_, message| {
                if !message.counted {
                    message.counted = true;
                    observer.enqueued();
                }
            });
        }
        if queue.messages.counts().visible > 0 {
            self.shared.arrived.notify_waiters();
        }
    }

    /// Looks at `name` again once `delay` has passed on tokio's clock.
    pub(super) fn wake_after(&self, state: &State, name: &str, delay: Duration) {
        let sqs = self.clone();
        let name = name.to_owned();
        let wake = Box::new(move || {
            let mut state = sqs.shared.lock();
            sqs.refresh(&mut state, &name);
        });
        match &state.observer {
            Some(observer) => observer.wake_after(delay, wake),
            None => {
                // Outside a runtime (a send from a plain thread) nothing can wait: the message
                // is found by the next receive that looks.
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        tokio::time::sleep(delay).await;
                        wake();
                    });
                }
            }
        }
    }
}
