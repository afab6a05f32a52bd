//! Where an engine's workers come from: its own bound, or a lane of a shared [`WorkerPool`].
//!
//! [`WorkerPool`]: super::WorkerPool

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{PoolLane, PoolPermit};

/// The workers an engine's dispatch takes a permit from for each handler call.
#[derive(Debug)]
pub(crate) enum WorkerSource {
    /// The engine's own bound: the semaphore and its size.
    Own(Arc<Semaphore>, usize),
    /// A lane of a pool shared with other engines.
    Shared(PoolLane),
}

impl WorkerSource {
    /// The engine's own bound of `workers`.
    pub(crate) fn own(workers: usize) -> Self {
        Self::Own(Arc::new(Semaphore::new(workers)), workers)
    }

    /// How many handler calls may run at once: the engine's own bound, or the pool's size.
    pub(crate) fn workers(&self) -> usize {
        match self {
            Self::Own(_, workers) => *workers,
            Self::Shared(lane) => lane.workers(),
        }
    }

    /// A worker, once one is free (for this lane, by the pool's schedule).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped call takes no worker.
    pub(crate) async fn acquire(&self) -> WorkerPermit {
        match self {
            Self::Own(semaphore, _) => WorkerPermit::Own(
                Arc::clone(semaphore)
                    .acquire_owned()
                    .await
                    .expect("an engine's own semaphore is never closed"),
            ),
            Self::Shared(lane) => WorkerPermit::Shared(lane.acquire().await),
        }
    }

    /// A worker if one is free now.
    pub(crate) fn try_acquire(&self) -> Option<WorkerPermit> {
        match self {
            Self::Own(semaphore, _) => Arc::clone(semaphore)
                .try_acquire_owned()
                .ok()
                .map(WorkerPermit::Own),
            Self::Shared(lane) => lane.try_acquire().map(WorkerPermit::Shared),
        }
    }

    /// Whether the workers come from a pool shared with other engines.
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self, Self::Shared(_))
    }

    /// The engine has no message waiting for a worker: a shared pool's workers kept for it
    /// go to the other engines until it asks again.
    pub(crate) fn idle(&self) {
        if let Self::Shared(lane) = self {
            lane.idle();
        }
    }
}

/// A worker held for one handler call, given back when dropped.
pub(crate) enum WorkerPermit {
    /// Of the engine's own bound.
    Own(#[allow(dead_code, reason = "held for its drop")] OwnedSemaphorePermit),
    /// Of a shared pool.
    Shared(#[allow(dead_code, reason = "held for its drop")] PoolPermit),
}

impl From<OwnedSemaphorePermit> for WorkerPermit {
    fn from(permit: OwnedSemaphorePermit) -> Self {
        Self::Own(permit)
    }
}
