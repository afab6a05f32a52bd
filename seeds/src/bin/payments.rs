//! Seed "Acknowledgement and delivery guarantees": a payments service that books payments into
//! a ledger and pays refunds.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqs_engine::prelude::*;

/// How long a payment on an account under review waits before the next try.
const REVIEW: Duration = Duration::from_secs(60);

/// The receive after which a payment under review is given up.
const LAST_RECEIVE: u32 = 3;

#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
#[outgoing(name = "payments")]
struct Payment {
    id: u64,
    account: String,
    amount_cents: u64,
    under_review: bool,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
#[outgoing(name = "ledger-entries")]
struct Entry {
    payment: u64,
    account: String,
    amount_cents: u64,
}

#[derive(OutSlot)]
#[publishes(Entry)]
struct Entries;

/// The ids of the payments already booked.
#[derive(Debug, Default, Clone)]
struct Ledger {
    booked: Arc<Mutex<HashSet<u64>>>,
}

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

#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
#[outgoing(name = "refunds")]
struct Refund {
    payment: u64,
    amount_cents: u64,
}

/// The largest refund paid without a person's approval.
const APPROVAL_LIMIT_CENTS: u64 = 50_000;

/// How long a refund waits for approval before it is looked at again.
const APPROVAL: Duration = Duration::from_secs(300);

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

#[ruststream::app]
fn app() -> impl App<State = Ledger> {
    RustStream::new(AppInfo::new("payments", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(Ledger::default()))
        .with_broker(
            SqsBroker::new()
                .endpoint("http://localhost:4566")
                .region("us-east-1")
                .test_credentials(),
            |b| {
                b.include(book).out(Entries, Publish::default()).build();
                b.include(settle_refunds.batch(nonzero!(10)));
            },
        )
}

// The service's tests, in process on a paused clock: the framework's `TestApp` runs the app
// above on sqs-engine's in-process SQS (the engine's `testing` feature, a dev-dependency), so
// the minute under review and the five minutes of an approval pass with no real waiting.
#[cfg(test)]
mod tests {
    use std::error::Error;

    use ruststream::testing::TestApp;

    use super::*;

    type TestResult = Result<(), Box<dyn Error>>;

    /// Just under a delay: what a test advances to show nothing comes back early.
    fn almost(delay: Duration) -> Duration {
        delay - Duration::from_secs(1)
    }

    #[tokio::test(start_paused = true)]
    async fn a_payment_delivered_twice_is_booked_once() -> TestResult {
        let tb = TestApp::start(app()).await?;
        let payment = Payment {
            id: 7,
            account: "acct-1".into(),
            amount_cents: 1_250,
            under_review: false,
        };

        tb.broker::<SqsBroker>().message(&payment).publish().await?;
        tb.broker::<SqsBroker>().message(&payment).publish().await?;

        tb.broker::<SqsBroker>()
            .subscriber("payments")
            .assert_called(2)
            .with(&payment)
            .settled(HandlerOutcome::ack());
        tb.broker::<SqsBroker>()
            .published::<Entry>("ledger-entries")
            .assert_called_once()
            .with(&Entry {
                payment: 7,
                account: "acct-1".into(),
                amount_cents: 1_250,
            });
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn a_payment_under_review_waits_a_minute_per_try_and_is_dropped_on_its_third_receive()
    -> TestResult {
        let tb = TestApp::start(app()).await?;
        let payment = Payment {
            id: 8,
            account: "acct-2".into(),
            amount_cents: 99,
            under_review: true,
        };
        let broker = tb.broker::<SqsBroker>();
        let payments = || broker.subscriber("payments");

        tb.broker::<SqsBroker>().message(&payment).publish().await?;
        payments()
            .assert_called_once()
            .settled(HandlerOutcome::retry_after(REVIEW));

        // Not back before the minute is up, back when it is.
        tb.advance(almost(REVIEW)).await?;
        payments().assert_called_once();
        tb.advance(Duration::from_secs(1)).await?;
        payments()
            .assert_called(2)
            .settled(HandlerOutcome::retry_after(REVIEW));

        tb.advance(REVIEW).await?;
        payments()
            .assert_called(3)
            .with(&payment)
            .settled(HandlerOutcome::drop());
        // Dropped for good: deleted, nothing comes back, nothing was booked.
        tb.advance(REVIEW * 10).await?;
        payments().assert_called(3);
        tb.broker::<SqsBroker>()
            .published::<Entry>("ledger-entries")
            .assert_not_called();
        tb.broker::<SqsBroker>()
            .published::<Payment>("payments")
            .assert_called_once();
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn three_refunds_in_one_batch_the_large_one_comes_back_alone_after_five_minutes()
    -> TestResult {
        let tb = TestApp::start(app()).await?;
        let small = Refund {
            payment: 1,
            amount_cents: 2_000,
        };
        let large = Refund {
            payment: 2,
            amount_cents: 75_000,
        };
        let other = Refund {
            payment: 3,
            amount_cents: 50_000,
        };
        let broker = tb.broker::<SqsBroker>();
        // The three are sent before the receivers run again (this test's runtime has one thread,
        // and each publish sends before its first wait), so one receive takes all three.
        let (a, b, c) = tokio::join!(
            broker.message(&small).publish(),
            broker.message(&large).publish(),
            broker.message(&other).publish(),
        );
        a?;
        b?;
        c?;
        let refunds = || broker.subscriber("refunds");
        assert_eq!(
            refunds().batches::<Refund>(),
            vec![vec![small, large, other]],
            "the three refunds reach the handler in one batch"
        );
        assert_eq!(
            refunds().outcomes().len(),
            1,
            "one call of the batch handler"
        );

        tb.advance(almost(APPROVAL)).await?;
        refunds().assert_batch_sizes(&[3]);
        tb.advance(Duration::from_secs(1)).await?;
        refunds()
            .assert_batch_sizes(&[3, 1])
            .with(&Refund {
                payment: 2,
                amount_cents: 75_000,
            })
            .settled(HandlerOutcome::retry_after(APPROVAL));
        tb.shutdown().await?;
        Ok(())
    }
}
