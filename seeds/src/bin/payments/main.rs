//! Seed "Acknowledgement and delivery guarantees": a payments service that books payments into
//! a ledger and pays refunds. Its subscribers are in `book.rs` and `refunds.rs`, the one copy
//! the load test and the engine's live tests include too.

use std::convert::Infallible;
use std::time::Duration;

use sqs_engine::prelude::*;

/// How long a payment on an account under review waits before the next try.
const REVIEW: Duration = Duration::from_secs(60);

include!("book.rs");

/// How long a refund waits for approval before it is looked at again.
const APPROVAL: Duration = Duration::from_secs(300);

include!("refunds.rs");

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
