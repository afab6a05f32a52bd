//! What a front sees of a queue's messages: where one stands, the counts, a receive, a
//! message looked at, and one moved out by the redrive policy.

use std::sync::Arc;

/// Where a message stands, as a front sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Standing {
    /// Receivable (on a FIFO queue, possibly held behind its group).
    Visible,
    /// Received, and neither deleted nor visible again.
    InFlight,
    /// Sent with a delay that has not passed.
    Delayed,
}

/// How many messages of a queue stand where, exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counts {
    /// Receivable (on a FIFO queue, including those held behind their group).
    pub visible: usize,
    /// Received, and neither deleted nor visible again.
    pub in_flight: usize,
    /// Sent with a delay that has not passed.
    pub delayed: usize,
}

/// One receive of a message.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Received<M> {
    /// What the front keeps of the message.
    pub data: M,
    /// The message's sequence number in its queue.
    pub seq: u64,
    /// Its receive count, this receive included: with `seq`, what names this receive.
    pub receive_count: u32,
    /// When it was first received, in epoch milliseconds.
    pub first_receive_millis: u64,
}

/// A stored message as a front looks at it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Message<'a, M> {
    /// Its sequence number in its queue.
    pub seq: u64,
    /// What the front keeps of it.
    pub data: &'a M,
    /// How many times it was received: with `seq`, what names its latest receive.
    pub receive_count: u32,
    /// Where it stands, as of the last call that released what was due.
    pub standing: Standing,
    /// The receive counts of its earlier receives that still name it: it was handed out again
    /// while they held it (see [`Messages::hand_out_again`](super::Messages::hand_out_again)).
    pub duplicated: &'a [u32],
}

/// A message a receive moved out of its queue by the redrive policy, for the front to store
/// in the dead-letter queue.
#[derive(Debug)]
#[non_exhaustive]
pub struct Redriven<M> {
    /// What the front keeps of it.
    pub data: M,
    /// Its group, on a FIFO queue.
    pub group: Option<Arc<str>>,
    /// How many times it was received: SQS keeps the count when it moves a message.
    pub receive_count: u32,
    /// When it was first received, in epoch milliseconds.
    pub first_receive_millis: Option<u64>,
}
