// The payments seed's `book` subscriber, with its messages and its state: the one copy of it,
// included (`include!`) by the seed binary (`main.rs` here), by the load test's
// `seed-payments` (once per broker) and by the engine's live seed tests, each after its
// broker's `use <broker>::prelude::*;` and its own `REVIEW` (how long a payment under review
// waits: 60 s in the seed, shorter where a real clock runs). Paths are spelled out so that the
// includer's `use` lines cannot clash with this file's. (No inner doc comment: this file is
// included.)

/// The receive after which a payment under review is given up.
const LAST_RECEIVE: u32 = 3;

/// A payment to book.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, Outgoing)]
#[outgoing(name = "payments")]
pub(crate) struct Payment {
    /// The payment's id.
    pub(crate) id: u64,
    /// The account paid from.
    pub(crate) account: String,
    /// The amount, in cents.
    pub(crate) amount_cents: u64,
    /// Whether the account is under review (the payment waits, then is dropped).
    pub(crate) under_review: bool,
}

/// A ledger entry, published for each payment booked.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, Outgoing)]
#[outgoing(name = "ledger-entries")]
pub(crate) struct Entry {
    /// The payment booked.
    pub(crate) payment: u64,
    /// Its account.
    pub(crate) account: String,
    /// Its amount, in cents.
    pub(crate) amount_cents: u64,
}

/// The `Out` slot of the ledger entries.
#[derive(OutSlot)]
#[publishes(Entry)]
pub(crate) struct Entries;

/// The ids of the payments already booked.
#[derive(Debug, Default, Clone)]
pub(crate) struct Ledger {
    booked: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<u64>>>,
}

/// Books a payment into the ledger and publishes its entry, once per payment; a payment under
/// review waits `REVIEW` and is dropped on its `LAST_RECEIVE`th receive.
#[subscriber(SqsQueue::new("payments"))]
async fn book(
    payment: &Payment,
    ctx: &mut Context<'_, (), Ledger>,
    Out(entries): Out<impl Publisher, Entries>,
) -> HandlerOutcome {
    // SQS counts the receives of a message, this one included.
    let receives: u32 = ctx
        .headers()
        .get_str(RECEIVE_COUNT_HEADER)
        .and_then(|count| count.parse().ok())
        .unwrap_or(1);
    if payment.under_review {
        if receives >= LAST_RECEIVE {
            tracing::error!(payment.id, receives, "payment dropped, still under review");
            return HandlerOutcome::drop();
        }
        return HandlerOutcome::retry_after(REVIEW);
    }
    let booked = std::sync::Arc::clone(&ctx.state().booked);
    if booked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .contains(&payment.id)
    {
        tracing::info!(payment.id, receives, "payment already booked");
        return HandlerOutcome::ack();
    }
    let entry = Entry {
        payment: payment.id,
        account: payment.account.clone(),
        amount_cents: payment.amount_cents,
    };
    if entries.message(&entry).publish().await.is_err() {
        // Nothing is booked yet: the payment comes back and the work runs again.
        return HandlerOutcome::retry();
    }
    booked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(payment.id);
    tracing::info!(payment.id, "payment booked");
    HandlerOutcome::ack()
}
