//! One pool of workers shared by several engines, each a lane with its own priority and
//! weight: [`WorkerPool`] and [`Share`].
//!
//! Each engine keeps its own receivers, prefetch, settlement, heartbeat and rate limit; only
//! the handler invocations come from the pool. When a worker frees up and several engines
//! have a message waiting for one, [`schedule`] decides which gets it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

use crate::bounded::{PoolWeight, Workers};
use crate::error::ConfigError;

mod schedule;
mod workers;

use schedule::{Schedule, Token};
pub(crate) use workers::{WorkerPermit, WorkerSource};

/// Handler invocations shared by several engines: the "high, normal, low" queues of one
/// service drawing on one bound.
///
/// Give each engine the pool with its [`Share`] through
/// [`EngineBuilder::worker_pool`](crate::EngineBuilder::worker_pool). An engine takes a worker
/// from the pool for each handler call (each receive's messages, with
/// [`run_batches`](crate::Engine::run_batches)) and gives it back when the handler returns.
/// While workers are free, every engine takes them as it needs them; once all are busy, a
/// worker that frees up goes to the waiting engine of the highest priority, and among engines
/// of one priority, in proportion to their weights.
///
/// A lower priority gets no worker while a higher one has a message waiting: its received
/// messages wait in its prefetch, their visibility extended by its heartbeat (up to
/// [`max_extension`](crate::EngineBuilder::max_extension), when set), and its receivers stop
/// once its [`prefetch`](crate::EngineBuilder::prefetch) is full. Give a low lane a small
/// prefetch so that little of it waits, or a weight instead of a priority so that it always
/// makes progress.
///
/// ```no_run
/// use sqs_engine::{Engine, Message, Outcome, Share, WorkerPool};
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let config = aws_config::load_from_env().await;
/// let pool = WorkerPool::new(32)?;
/// let urgent = Engine::builder()
///     .sdk_config(&config)
///     .queue("orders-urgent")
///     .worker_pool(&pool, Share::priority(1))
///     .build()?;
/// let bulk = Engine::builder()
///     .sdk_config(&config)
///     .queue("orders-bulk")
///     .worker_pool(&pool, Share::default())
///     .prefetch(10)
///     .build()?;
/// let handler = |_message: Message| async { Outcome::Ack };
/// let stop = tokio_util::sync::CancellationToken::new();
/// tokio::try_join!(
///     urgent.run(handler, stop.clone().cancelled_owned()),
///     bulk.run(handler, stop.clone().cancelled_owned()),
/// )?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct WorkerPool {
    inner: Arc<Pool>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("workers", &self.inner.workers)
            .finish_non_exhaustive()
    }
}

/// The pool behind its handles.
struct Pool {
    workers: usize,
    state: Mutex<PoolState>,
    next_token: AtomicU64,
}

/// The schedule and the channels of its waiters.
struct PoolState {
    schedule: Schedule,
    waiters: HashMap<Token, oneshot::Sender<PoolPermit>>,
}

impl WorkerPool {
    /// A pool of `workers` handler invocations at once, 1..=100 000.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `workers` when `workers` is out of its range.
    pub fn new(workers: usize) -> Result<Self, ConfigError> {
        let workers = Workers::new(workers)?.get();
        Ok(Self {
            inner: Arc::new(Pool {
                workers,
                state: Mutex::new(PoolState {
                    schedule: Schedule::new(workers),
                    waiters: HashMap::new(),
                }),
                next_token: AtomicU64::new(0),
            }),
        })
    }

    /// The handler invocations the pool allows at once.
    pub fn workers(&self) -> usize {
        self.inner.workers
    }

    /// A new lane of the pool, for one engine.
    pub(crate) fn lane(&self, share: Share) -> Result<PoolLane, ConfigError> {
        let weight = PoolWeight::new(share.weight)?.get();
        let lane = self.inner.lock().schedule.add_lane(share.priority, weight);
        Ok(PoolLane {
            pool: Arc::clone(&self.inner),
            lane,
        })
    }
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // Plain data under the lock, and no code under it panics.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A worker is done: it goes to the next waiter whose future is still there, or is kept
    /// for an active lane, or is free again.
    fn release(self: &Arc<Self>) {
        let waiter = {
            let mut state = self.lock();
            let grant = state.schedule.release();
            state.claim(grant)
        };
        self.hand(waiter);
    }

    /// Sends a worker to `waiter`, if any; a waiter whose future went away between its grant
    /// and now passes it on, as a release.
    fn hand(self: &Arc<Self>, mut waiter: Option<oneshot::Sender<PoolPermit>>) {
        while let Some(sender) = waiter {
            match sender.send(PoolPermit::new(Arc::clone(self))) {
                Ok(()) => return,
                // The worker goes round again, without a drop that would release it from
                // inside this loop.
                Err(mut unclaimed) => {
                    unclaimed.pool = None;
                    let mut state = self.lock();
                    let grant = state.schedule.release();
                    waiter = state.claim(grant);
                }
            }
        }
    }
}

impl PoolState {
    /// The channel of the waiter `grant` names; a grant whose waiter's future was dropped goes
    /// round again, under the same lock.
    fn claim(&mut self, mut grant: Option<(usize, Token)>) -> Option<oneshot::Sender<PoolPermit>> {
        while let Some((_, token)) = grant {
            if let Some(waiter) = self.waiters.remove(&token) {
                return Some(waiter);
            }
            grant = self.schedule.release();
        }
        None
    }
}

/// How an engine shares a [`WorkerPool`] with the others: its priority (higher first; default
/// 0) and its weight among the engines of its priority (1..=1000; default 1).
///
/// ```
/// use sqs_engine::Share;
///
/// let urgent = Share::priority(2);
/// let normal = Share::weight(3);
/// let low = Share::weight(1);
/// assert_eq!(urgent, Share::default().with_priority(2));
/// # let _ = (normal, low);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct Share {
    priority: u8,
    weight: u32,
}

impl Default for Share {
    fn default() -> Self {
        Self {
            priority: 0,
            weight: 1,
        }
    }
}

impl Share {
    /// Priority `priority`, weight 1: served before every lower priority while it waits.
    pub fn priority(priority: u8) -> Self {
        Self::default().with_priority(priority)
    }

    /// Priority 0, weight `weight`: among the engines of its priority, workers in proportion
    /// to the weights. Checked by [`build`](crate::EngineBuilder::build): 1..=1000.
    pub fn weight(weight: u32) -> Self {
        Self::default().with_weight(weight)
    }

    /// This share at `priority`.
    pub fn with_priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// This share with `weight`.
    pub fn with_weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }
}

/// One engine's lane of a pool.
pub(crate) struct PoolLane {
    pool: Arc<Pool>,
    lane: usize,
}

impl std::fmt::Debug for PoolLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolLane")
            .field("lane", &self.lane)
            .field("workers", &self.pool.workers)
            .finish()
    }
}

impl PoolLane {
    /// The pool's size.
    pub(crate) fn workers(&self) -> usize {
        self.pool.workers
    }

    /// A worker, once the schedule gives this lane one.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before its grant, the lane stops waiting; dropped after, the
    /// worker goes to the next waiter.
    pub(crate) async fn acquire(&self) -> PoolPermit {
        let token = self.pool.next_token.fetch_add(1, Ordering::Relaxed);
        let receiver = {
            let mut state = self.pool.lock();
            if state.schedule.acquire(self.lane, token) {
                return PoolPermit::new(Arc::clone(&self.pool));
            }
            let (sender, receiver) = oneshot::channel();
            state.waiters.insert(token, sender);
            receiver
        };
        let mut waiting = Waiting {
            lane: self,
            token,
            served: false,
        };
        // A waiter's sender leaves the map only to be sent on, or with this future's own
        // cancellation: it is never dropped unanswered while this waits.
        let permit = receiver
            .await
            .expect("a waiting lane's channel is answered");
        waiting.served = true;
        permit
    }

    /// A worker if one is kept for this lane or free now.
    pub(crate) fn try_acquire(&self) -> Option<PoolPermit> {
        self.pool
            .lock()
            .schedule
            .try_acquire(self.lane)
            .then(|| PoolPermit::new(Arc::clone(&self.pool)))
    }

    /// This lane has no message waiting for a worker: the workers kept for it go to the other
    /// lanes, until it asks again.
    pub(crate) fn idle(&self) {
        let waiters: Vec<_> = {
            let mut state = self.pool.lock();
            let grants = state.schedule.idle(self.lane);
            grants
                .into_iter()
                .filter_map(|grant| state.claim(Some(grant)))
                .collect()
        };
        for waiter in waiters {
            self.pool.hand(Some(waiter));
        }
    }
}

impl Drop for PoolLane {
    fn drop(&mut self) {
        self.idle();
    }
}

/// A lane's waiter: stops waiting when dropped unserved.
struct Waiting<'a> {
    lane: &'a PoolLane,
    token: Token,
    served: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.served {
            return;
        }
        let mut state = self.lane.pool.lock();
        if state.schedule.cancel(self.lane.lane, self.token) {
            state.waiters.remove(&self.token);
        }
        // Otherwise the worker was granted: it is in the channel, whose receiver drops after
        // this and releases it, or its send fails and the pool hands it on.
    }
}

/// A worker of a shared pool, given back when dropped.
pub(crate) struct PoolPermit {
    pool: Option<Arc<Pool>>,
}

impl PoolPermit {
    fn new(pool: Arc<Pool>) -> Self {
        Self { pool: Some(pool) }
    }
}

impl Drop for PoolPermit {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_freed_worker_goes_to_the_waiting_lane_of_the_higher_priority() {
        let pool = WorkerPool::new(1).expect("pool");
        let low = pool.lane(Share::default()).expect("lane");
        let high = pool.lane(Share::priority(1)).expect("lane");
        let held = low.acquire().await;
        let (order_tx, mut order) = tokio::sync::mpsc::unbounded_channel();
        let low_waiter = {
            let order_tx = order_tx.clone();
            async move {
                let _permit = low.acquire().await;
                order_tx.send("low").expect("open");
            }
        };
        let low_waiter = tokio::spawn(low_waiter);
        tokio::time::sleep(Duration::from_millis(1)).await;
        let high_waiter = tokio::spawn(async move {
            let _permit = high.acquire().await;
            order_tx.send("high").expect("open");
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        drop(held);
        high_waiter.await.expect("served");
        low_waiter.await.expect("served");
        assert_eq!(
            order.recv().await,
            Some("high"),
            "the later but higher waiter first"
        );
        assert_eq!(order.recv().await, Some("low"));
        assert!(
            pool.lane(Share::default())
                .expect("lane")
                .try_acquire()
                .is_some()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_dropped_before_or_after_its_grant_loses_no_worker() {
        let pool = WorkerPool::new(1).expect("pool");
        let lane = pool.lane(Share::default()).expect("lane");
        let held = lane.try_acquire().expect("free");
        assert!(lane.try_acquire().is_none());
        // Dropped while waiting.
        let waiting = tokio::time::timeout(Duration::from_millis(5), lane.acquire()).await;
        assert!(waiting.is_err(), "no worker was free");
        // Granted, then dropped before it was polled again.
        let mut granted = Box::pin(lane.acquire());
        assert!(futures_poll_once(granted.as_mut()).await.is_none());
        drop(held);
        drop(granted);
        let again = lane.try_acquire().expect("the worker came back");
        drop(again);
        lane.idle();
        assert_eq!(pool.inner.lock().schedule.free(), 1);
        assert!(pool.inner.lock().waiters.is_empty());
    }

    /// Polls `future` once.
    async fn futures_poll_once<F: Future + Unpin>(mut future: F) -> Option<F::Output> {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut future).poll(cx) {
                std::task::Poll::Ready(output) => Some(output),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }

    #[test]
    fn a_weight_out_of_its_range_is_refused() {
        let pool = WorkerPool::new(4).expect("pool");
        assert!(pool.lane(Share::weight(0)).is_err());
        assert!(pool.lane(Share::weight(1001)).is_err());
        assert!(pool.lane(Share::weight(1000)).is_ok());
        assert!(WorkerPool::new(0).is_err());
    }
}
