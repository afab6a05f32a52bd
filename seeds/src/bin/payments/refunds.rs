// The payments seed's `settle_refunds` subscriber and its message: the one copy of it, included
// (`include!`) by the seed binary (`main.rs` here) and by the engine's live seed tests, each
// after its broker's `use <broker>::prelude::*;` and its own `APPROVAL` (how long a large
// refund waits: 300 s in the seed, shorter where a real clock runs). (No inner doc comment:
// this file is included.)

/// A refund of a payment.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, Outgoing)]
#[outgoing(name = "refunds")]
pub(crate) struct Refund {
    /// The payment refunded.
    pub(crate) payment: u64,
    /// The amount, in cents.
    pub(crate) amount_cents: u64,
}

/// The largest refund paid without a person's approval.
const APPROVAL_LIMIT_CENTS: u64 = 50_000;

/// Settles each refund of a batch on its own: a small refund is paid and deleted, a large one
/// waits on the queue for its approval.
#[subscriber(SqsQueue::new("refunds"))]
async fn settle_refunds(refunds: &[Refund]) -> Vec<HandlerOutcome> {
    refunds
        .iter()
        .map(|refund| {
            if refund.amount_cents > APPROVAL_LIMIT_CENTS {
                tracing::info!(refund.payment, "refund waits for approval");
                HandlerOutcome::retry_after(APPROVAL)
            } else {
                tracing::info!(refund.payment, refund.amount_cents, "refund paid");
                HandlerOutcome::ack()
            }
        })
        .collect()
}
