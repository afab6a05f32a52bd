// The payments service of `seeds/src/bin/payments.rs` (its `book` subscriber), included into one
// module per broker after that module's `use <broker>::prelude::*;`: the same code on both.
// The handler, its messages and its queue names are the seed's; only the app is built here
// from the run's SDK configuration and worker count instead of the seed's fixed endpoint.
// (No inner doc comment: this file is `include!`d.)

use std::collections::HashSet;
use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long a payment on an account under review waits before the next try.
const REVIEW: Duration = Duration::from_secs(60);

/// The receive after which a payment under review is given up.
const LAST_RECEIVE: u32 = 3;

/// A payment to book: the seed's `Payment`.
#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
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

/// A ledger entry, published for each payment booked: the seed's `Entry`.
#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
#[outgoing(name = "ledger-entries")]
struct Entry {
    payment: u64,
    account: String,
    amount_cents: u64,
}

/// The `Out` slot of the ledger entries.
#[derive(OutSlot)]
#[publishes(Entry)]
struct Entries;

/// The ids of the payments already booked.
#[derive(Debug, Default, Clone)]
pub(crate) struct Ledger {
    booked: Arc<Mutex<HashSet<u64>>>,
}

/// The seed's subscriber, unchanged: books a payment into the ledger and publishes its entry.
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
    let booked = Arc::clone(&ctx.state().booked);
    if booked
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
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
        .unwrap_or_else(PoisonError::into_inner)
        .insert(payment.id);
    tracing::info!(payment.id, "payment booked");
    HandlerOutcome::ack()
}

/// Runs the service on `config` with `workers` deliveries of `book` at once (the seed's mount,
/// with `.workers(..)`), until `stop` completes; then shuts it down gracefully.
///
/// # Errors
///
/// When the service cannot start (a queue cannot be opened) or its shutdown fails.
pub(crate) async fn serve(
    config: aws_config::SdkConfig,
    workers: NonZeroUsize,
    started: impl FnOnce(),
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let app = RustStream::new(AppInfo::new("payments", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(Ledger::default()))
        .with_broker(SqsBroker::from_config(config), move |b| {
            b.include(book.workers(workers))
                .out(Entries, Publish::default())
                .build();
        });
    let running = app
        .start()
        .await
        .map_err(|error| anyhow::anyhow!("starting the payments service: {error}"))?;
    started();
    stop.await;
    running
        .shutdown()
        .await
        .map_err(|error| anyhow::anyhow!("shutting the payments service down: {error}"))
}
