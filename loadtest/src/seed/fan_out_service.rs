// The payments service of `seeds/src/bin/payments.rs` with its booking fanned out: `book` is the
// seed's subscriber, but the entry of a payment booked goes to the SNS topic `payments-booked`
// (`SnsPublish`), which delivers it, raw, to two queues, each with a subscriber of its own:
// `post` on `ledger` and `notify` on `payment-notices`. The queues are subscribed to the topic
// after startup (`subscribe_queue_to_topic`, as the brokers' fan-out examples do on every
// start). Included into one module per broker after that module's `use <broker>::prelude::*;`:
// the same code on both. (No inner doc comment: this file is `include!`d.)

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

/// The topic a booking is published to.
pub(crate) const TOPIC: &str = "payments-booked";

/// The queues subscribed to [`TOPIC`], each consumed by a subscriber of the service.
pub(crate) const SUBSCRIBED: [&str; 2] = ["ledger", "payment-notices"];

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

/// A payment booked: the seed's ledger entry, published to the topic.
#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
#[outgoing(name = "payments-booked")]
struct Booked {
    payment: u64,
    account: String,
    amount_cents: u64,
}

/// The `Out` slot of the bookings.
#[derive(OutSlot)]
#[publishes(Booked)]
struct Bookings;

/// Which payments each subscribed queue's subscriber has handled, and the signal that both
/// have handled every payment.
#[derive(Debug)]
pub(crate) struct Progress {
    /// The payments of the run.
    expected: usize,
    /// The payment ids handled, per queue of [`SUBSCRIBED`].
    handled: Mutex<[HashSet<u64>; 2]>,
    /// Notified once, when both hold `expected` ids.
    done: tokio::sync::Notify,
}

impl Progress {
    /// No payment handled yet, of `expected`.
    fn new(expected: usize) -> Self {
        Self {
            expected,
            handled: Mutex::new([HashSet::new(), HashSet::new()]),
            done: tokio::sync::Notify::new(),
        }
    }

    /// Notes that the subscriber of queue `SUBSCRIBED[queue]` handled `payment`.
    fn handled(&self, queue: usize, payment: u64) {
        let mut handled = self.handled.lock().unwrap_or_else(PoisonError::into_inner);
        if handled[queue].insert(payment)
            && handled.iter().all(|ids| ids.len() >= self.expected)
            && handled[queue].len() == self.expected
        {
            // The last id of the second queue to complete: once.
            self.done.notify_one();
        }
    }
}

/// The service's state: the payments booked, and the subscribers' progress.
#[derive(Debug, Clone)]
pub(crate) struct Books {
    booked: Arc<Mutex<HashSet<u64>>>,
    progress: Arc<Progress>,
}

/// The seed's subscriber, publishing the booking to the topic instead of a queue.
#[subscriber(SqsQueue::new("payments"))]
async fn book(
    payment: &Payment,
    ctx: &mut Context<'_, (), Books>,
    Out(bookings): Out<impl Publisher, Bookings>,
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
    let entry = Booked {
        payment: payment.id,
        account: payment.account.clone(),
        amount_cents: payment.amount_cents,
    };
    if bookings.message(&entry).publish().await.is_err() {
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

/// Posts a booking to the ledger (the first subscribed queue's subscriber).
#[subscriber(SqsQueue::new("ledger"))]
async fn post(booked: &Booked, ctx: &mut Context<'_, (), Books>) -> HandlerOutcome {
    ctx.state().progress.handled(0, booked.payment);
    tracing::info!(booked.payment, "booking posted");
    HandlerOutcome::ack()
}

/// Sends the account holder a notice of a booking (the second subscribed queue's subscriber).
#[subscriber(SqsQueue::new("payment-notices"))]
async fn notify(booked: &Booked, ctx: &mut Context<'_, (), Books>) -> HandlerOutcome {
    ctx.state().progress.handled(1, booked.payment);
    tracing::info!(booked.payment, "notice sent");
    HandlerOutcome::ack()
}

/// Subscribes the queues to the topic, through the app's connection.
async fn wire(broker: SqsBroker) -> std::io::Result<()> {
    let connected = broker.connect().await.map_err(std::io::Error::other)?;
    for queue in SUBSCRIBED {
        connected
            .subscribe_queue_to_topic(TOPIC, queue)
            .await
            .map_err(std::io::Error::other)?;
    }
    Ok(())
}

/// Runs the service on `config` with `workers` deliveries at once of each subscriber, until
/// `stop` completes; then shuts it down gracefully. `drained` is called once both subscribed
/// queues' subscribers have handled each of `payments` payments (ids 0 to `payments - 1`).
///
/// # Errors
///
/// When the service cannot start (a queue cannot be opened, the topic cannot be wired) or its
/// shutdown fails.
pub(crate) async fn serve(
    config: aws_config::SdkConfig,
    workers: NonZeroUsize,
    payments: usize,
    started: impl FnOnce(),
    drained: impl FnOnce(),
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let progress = Arc::new(Progress::new(payments));
    let books = Books {
        booked: Arc::default(),
        progress: Arc::clone(&progress),
    };
    let broker = SqsBroker::from_config(config);
    // A clone connects through the connection the app's broker holds.
    let topology = broker.clone();
    let app = RustStream::new(AppInfo::new("payments", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(books))
        .after_startup(async move |_books| wire(topology).await)
        .with_broker(broker, move |b| {
            b.include(book.workers(workers))
                .out(Bookings, SnsPublish::default())
                .build();
            b.include(post.workers(workers));
            b.include(notify.workers(workers));
        });
    let running = app
        .start()
        .await
        .map_err(|error| anyhow::anyhow!("starting the payments service: {error}"))?;
    started();
    let mut stop = std::pin::pin!(stop);
    let drained_first = tokio::select! {
        () = &mut stop => false,
        () = progress.done.notified() => true,
    };
    if drained_first {
        drained();
        stop.await;
    }
    running
        .shutdown()
        .await
        .map_err(|error| anyhow::anyhow!("shutting the payments service down: {error}"))
}
