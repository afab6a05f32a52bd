//! The services of the settlement documents (`shared/seeds/`) on the RustStream broker, live
//! against LocalStack.
//!
//! The service code is the seeds' own, but for the `use` line and for the delays: LocalStack
//! runs on a real clock, so `REVIEW` (60 s in the seed) is 2 s here, `APPROVAL` (300 s) is 2 s,
//! and `RECHECK` is 1 s. The queue names are the seeds' too; the tests that share a queue take
//! turns, and each starts from an empty queue.
//!
//! The same behaviours run in process, on a paused clock and with the seeds' own delays, in
//! the tests at the bottom of each seed binary (`seeds/src/bin/`, `cargo test -p
//! sqs-engine-seeds`).

use sqs_engine_test_support as support;

use std::convert::Infallible;
use std::time::Duration;

use futures::future::try_join_all;
use ruststream::testing::{Outcome, TestApp};
use sqs_engine::prelude::*;

/// The tests on the payments queues take turns, and so do those on the invoices queues.
static PAYMENTS: Turns = Turns::new();
static INVOICES: Turns = Turns::new();

/// Turns on a set of queues, with a quiet period between them.
///
/// An app that shuts down abandons its long polls after a second, but the queue does not know:
/// a poll stays open on the server until its 20 s wait ends, and a message sent meanwhile goes
/// to it, to come back only when its visibility lapses (with a receive counted). The next test
/// on the same queues starts once the abandoned polls have ended.
struct Turns(tokio::sync::Mutex<Option<std::time::Instant>>);

/// The wait of the seeds' subscriptions, and a margin.
const QUIET: Duration = Duration::from_secs(21);

impl Turns {
    const fn new() -> Self {
        Self(tokio::sync::Mutex::const_new(None))
    }

    async fn take(&'static self) -> Turn {
        let guard = self.0.lock().await;
        if let Some(ended) = *guard {
            tokio::time::sleep(QUIET.saturating_sub(ended.elapsed())).await;
        }
        Turn(guard)
    }
}

/// A test's turn on its queues; when it ends, the quiet period starts.
struct Turn(tokio::sync::MutexGuard<'static, Option<std::time::Instant>>);

impl Drop for Turn {
    fn drop(&mut self) {
        *self.0 = Some(std::time::Instant::now());
    }
}

/// How long the harness waits for a live reaction to settle.
const SETTLE: Duration = Duration::from_secs(30);

fn broker() -> SqsBroker {
    SqsBroker::new()
        .endpoint(support::endpoint())
        .region("us-east-1")
        .test_credentials()
}

/// Creates the queues (standard, no redrive policy) and empties them of what earlier runs left.
async fn fresh_queues(names: &[&str]) {
    let client = support::client().await;
    for name in names {
        let url = support::create_queue(&client, name, 30).await;
        client
            .set_queue_attributes()
            .queue_url(&url)
            .attributes(aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy, "")
            .send()
            .await
            .expect("SetQueueAttributes");
        // A purge may be refused when another ran in the last minute; the receives below
        // empty the queue then.
        let _ = client.purge_queue().queue_url(&url).send().await;
        loop {
            let messages = support::receive_raw(&client, &url, 0, 30).await;
            if messages.is_empty() {
                break;
            }
            for message in messages {
                if let Some(handle) = message.receipt_handle {
                    let _ = client
                        .delete_message()
                        .queue_url(&url)
                        .receipt_handle(handle)
                        .send()
                        .await;
                }
            }
        }
    }
}

mod payments {
    //! Seed "Acknowledgement and delivery guarantees": `book` and `settle_refunds`.

    use super::*;

    /// How long a payment on an account under review waits before the next try. 60 s in the
    /// seed.
    pub(crate) const REVIEW: Duration = Duration::from_secs(2);

    include!("../../seeds/src/bin/payments/book.rs");

    /// How long a refund waits for approval before it is looked at again. 300 s in the seed.
    pub(crate) const APPROVAL: Duration = Duration::from_secs(2);

    include!("../../seeds/src/bin/payments/refunds.rs");

    pub(crate) fn app() -> impl App<State = Ledger> {
        RustStream::new(AppInfo::new("payments", "0.1.0"))
            .on_startup(async move |()| Ok::<_, Infallible>(Ledger::default()))
            .with_broker(broker(), |b| {
                b.include(book).out(Entries, Publish::default()).build();
                b.include(settle_refunds.batch(nonzero!(10)));
            })
    }
}

fn payment(id: u64, under_review: bool) -> payments::Payment {
    payments::Payment {
        id,
        account: "acct-1".into(),
        amount_cents: 1_250,
        under_review,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_delivered_twice_is_booked_once() {
    let _turn = PAYMENTS.take().await;
    fresh_queues(&["payments", "ledger-entries", "refunds"]).await;
    let tb = TestApp::start_live_within(payments::app(), SETTLE)
        .await
        .expect("the app starts");
    for _ in 0..2 {
        tb.broker::<SqsBroker>()
            .message(&payment(1, false))
            .publish()
            .await
            .expect("publish");
    }
    tb.broker::<SqsBroker>()
        .subscriber("payments")
        .assert_called(2)
        .settled(HandlerOutcome::ack());
    tb.broker::<SqsBroker>()
        .published::<payments::Entry>("ledger-entries")
        .assert_called_once()
        .with(&payments::Entry {
            payment: 1,
            account: "acct-1".into(),
            amount_cents: 1_250,
        });
    tb.shutdown().await.expect("shutdown");

    // The entry is on the ledger queue, sent once.
    let client = support::client().await;
    let url = support::create_queue(&client, "ledger-entries", 30).await;
    let bodies: Vec<String> = support::receive_raw(&client, &url, 2, 30)
        .await
        .into_iter()
        .filter_map(|m| m.body)
        .collect();
    assert_eq!(bodies.len(), 1, "one ledger entry: {bodies:?}");
    let entry: payments::Entry = serde_json::from_str(&bodies[0]).expect("an entry");
    assert_eq!(entry.payment, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_under_review_is_retried_and_dropped_on_its_third_receive() {
    let _turn = PAYMENTS.take().await;
    fresh_queues(&["payments", "ledger-entries", "refunds"]).await;
    let tb = TestApp::start_live_within(payments::app(), SETTLE)
        .await
        .expect("the app starts");
    let started = std::time::Instant::now();
    tb.broker::<SqsBroker>()
        .message(&payment(2, true))
        .publish()
        .await
        .expect("publish");
    tb.advance(payments::REVIEW).await.expect("second receive");
    tb.advance(payments::REVIEW).await.expect("third receive");
    assert_eq!(
        tb.broker::<SqsBroker>().subscriber("payments").outcomes(),
        [Outcome::Nack, Outcome::Nack, Outcome::Drop]
    );
    assert!(
        started.elapsed() >= 2 * payments::REVIEW,
        "each retry waited REVIEW on the queue: {:?}",
        started.elapsed()
    );
    tb.broker::<SqsBroker>()
        .published::<payments::Entry>("ledger-entries")
        .assert_not_called();
    tb.shutdown().await.expect("shutdown");

    // Dropped means deleted: nothing comes back.
    let client = support::client().await;
    let url = support::create_queue(&client, "payments", 30).await;
    tokio::time::sleep(payments::REVIEW).await;
    assert_eq!(support::counts(&client, &url).await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_refunds_settle_one_by_one_and_the_large_one_comes_back_alone() {
    let _turn = PAYMENTS.take().await;
    fresh_queues(&["payments", "ledger-entries", "refunds"]).await;
    let tb = TestApp::start_live_within(payments::app(), SETTLE)
        .await
        .expect("the app starts");
    let refunds = [
        payments::Refund {
            payment: 1,
            amount_cents: 1_000,
        },
        payments::Refund {
            payment: 2,
            amount_cents: 90_000,
        },
        payments::Refund {
            payment: 3,
            amount_cents: 2_500,
        },
    ];
    let broker = tb.broker::<SqsBroker>();
    try_join_all(
        refunds
            .iter()
            .map(|refund| broker.message(refund).publish()),
    )
    .await
    .expect("publish");
    tb.advance(payments::APPROVAL)
        .await
        .expect("the large one again");
    let batches: Vec<Vec<u64>> = tb
        .broker::<SqsBroker>()
        .subscriber("refunds")
        .batches::<payments::Refund>()
        .into_iter()
        .map(|batch| batch.into_iter().map(|refund| refund.payment).collect())
        .collect();
    let (last, first) = batches.split_last().expect("batches");
    let mut first: Vec<u64> = first.concat();
    first.sort_unstable();
    assert_eq!(
        first,
        [1, 2, 3],
        "every refund once in the first batches: {batches:?}"
    );
    assert_eq!(last, &[2], "the large refund came back alone: {batches:?}");
    tb.shutdown().await.expect("shutdown");
}

mod invoices {
    //! Seed "Dead letters", in its macro form.

    use super::*;

    /// How long an invoice that is not ready waits before it is looked at again.
    pub(crate) const RECHECK: Duration = Duration::from_secs(1);

    include!("../../seeds/src/bin/invoices/service.rs");

    /// The declaration by halves: a cap without a dead-letter queue.
    pub(crate) fn only_max_attempts(broker: SqsBroker) -> impl App {
        RustStream::new(AppInfo::new("invoices", "0.1.0")).with_broker(broker, |b| {
            b.include(settle).max_attempts(nonzero!(3u32));
            b.include(escalate);
        })
    }

    /// The declaration by halves on a bare name: a dead-letter queue without a cap.
    pub(crate) fn only_dead_letter_by_name(broker: SqsBroker) -> impl App {
        RustStream::new(AppInfo::new("invoices", "0.1.0")).with_broker(broker, |b| {
            b.include(escalate).dead_letter("invoices-dead");
        })
    }
}

mod invoices_manual {
    //! Seed "Dead letters", in its manual form.

    use super::invoices::{Invoice, RECHECK};
    use super::*;

    include!("../../seeds/src/bin/invoices-manual/service.rs");
}

/// Publishes invoice 7, lets it run out its receives, and checks where it ended.
async fn an_invoice_that_is_never_ready_ends_in_the_dead_letter_queue<A: App>(app: A) {
    let _turn = INVOICES.take().await;
    fresh_queues(&["invoices", "invoices-dead"]).await;
    let tb = TestApp::start_live_within(app, SETTLE)
        .await
        .expect("the app starts");
    tb.broker::<SqsBroker>()
        .message(&invoices::Invoice { id: 7 })
        .publish()
        .await
        .expect("publish");
    for _ in 0..2 {
        tb.advance(invoices::RECHECK).await.expect("a recheck");
    }
    // The third recheck never comes: the receive after it finds the cap spent, and SQS moves
    // the invoice instead of handing it out. (The harness would wait for a fourth delivery.)
    support::eventually(SETTLE, "the invoice reaches the dead-letter queue", || {
        !tb.broker::<SqsBroker>()
            .subscriber("invoices-dead")
            .outcomes()
            .is_empty()
    })
    .await;
    tb.broker::<SqsBroker>()
        .subscriber("invoices")
        .assert_called(3);
    tb.broker::<SqsBroker>()
        .subscriber("invoices-dead")
        .assert_called_once()
        .with(&invoices::Invoice { id: 7 })
        .settled(HandlerOutcome::ack());
    tb.shutdown().await.expect("shutdown");

    // The queue carries the policy the mount site declared.
    let client = support::client().await;
    let url = support::create_queue(&client, "invoices", 30).await;
    let attributes = client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy)
        .send()
        .await
        .expect("GetQueueAttributes")
        .attributes
        .unwrap_or_default();
    let policy = attributes
        .get(&aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy)
        .expect("a redrive policy");
    assert!(policy.contains("invoices-dead"), "{policy}");
    assert!(policy.contains('3'), "{policy}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn macros_an_invoice_is_received_three_times_then_moved_to_the_dead_letter_queue() {
    an_invoice_that_is_never_ready_ends_in_the_dead_letter_queue(invoices::service(broker())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_an_invoice_is_received_three_times_then_moved_to_the_dead_letter_queue() {
    an_invoice_that_is_never_ready_ends_in_the_dead_letter_queue(
        invoices_manual::service(broker()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_without_a_dead_letter_queue_stops_the_service_at_startup() {
    let text = startup_refusal(invoices::only_max_attempts(broker())).await;
    assert!(text.contains("dead_letter(..)"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_queue_without_a_cap_on_a_bare_name_stops_the_service_at_startup() {
    let text = startup_refusal(invoices::only_dead_letter_by_name(broker())).await;
    assert!(text.contains("max_attempts(..)"), "{text}");
}

/// Starts `app`, which declares half a redrive policy, and returns the text of the error that
/// refuses it, with its source's.
async fn startup_refusal<A: App>(app: A) -> String {
    let Err(err) = TestApp::start_live(app).await else {
        panic!("half a redrive policy is refused");
    };
    format!(
        "{err} {:?}",
        std::error::Error::source(&err).map(ToString::to_string)
    )
}
