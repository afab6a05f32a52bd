//! The room a held message takes among the bytes the engine may hold: its body and message
//! attributes, as SQS counts a message's size.

use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;

use crate::metrics::QueueMetrics;

/// A message's share of the bytes held, in KiB of a semaphore: given back, and taken off the
/// held-bytes gauge, when the message is settled or dropped (its handler has the message by
/// then, or it is gone).
pub(crate) struct BodyRoom {
    permit: OwnedSemaphorePermit,
    metrics: Arc<QueueMetrics>,
}

impl BodyRoom {
    /// `permit`'s KiB, counted on the gauge until this is dropped.
    pub(crate) fn new(permit: OwnedSemaphorePermit, metrics: Arc<QueueMetrics>) -> Self {
        metrics.held_bytes(kib_as_bytes(&permit));
        Self { permit, metrics }
    }
}

fn kib_as_bytes(permit: &OwnedSemaphorePermit) -> f64 {
    permit.num_permits() as f64 * 1024.0
}

impl Drop for BodyRoom {
    fn drop(&mut self) {
        self.metrics.held_bytes(-kib_as_bytes(&self.permit));
    }
}
