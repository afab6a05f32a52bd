//! The services of the settlement documents (`shared/seeds/`), on sqs-engine's RustStream
//! broker. Each binary is a seed's code as written there, but for its `use` line:
//!
//! - `payments`: "Acknowledgement and delivery guarantees" (`book`, `settle_refunds`);
//! - `invoices`: "Dead letters", the macro form;
//! - `invoices-manual`: "Dead letters", the manual form.
//!
//! They compile in CI, which keeps the broker's surface what the seeds use, and this crate
//! turns on the engine's `ruststream` feature for the workspace. Their behaviour is tested
//! against LocalStack in `engine/tests/ruststream_seeds.rs`, and in process, on a paused clock,
//! by the tests at the bottom of each binary (`cargo test -p sqs-engine-seeds`).

use std::error::Error;
use std::time::Duration;

use ruststream::testing::TestApp;
use serde::{Deserialize, Serialize};
use sqs_engine::prelude::*;

/// The invoice of the dead-letter seed, as it travels.
#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
#[outgoing(name = "invoices")]
pub struct Invoice {
    /// The invoice number.
    pub id: u64,
}

/// The dead-letter seed's behaviour, for both of its forms: an invoice is received three
/// times, `recheck` apart, then moves to `invoices-dead`, where the escalation reads it once;
/// `settle` never sees it a fourth time. Runs the app in process, on a paused clock.
///
/// # Errors
///
/// The harness's errors (start, publish, advance, shutdown); a failed assertion panics.
pub async fn an_invoice_never_ready_moves_to_the_dead_letter_queue<A>(
    app: A,
    recheck: Duration,
) -> Result<(), Box<dyn Error>>
where
    A: App,
    A::State: Send + Sync + 'static,
{
    let tb = TestApp::start(app).await?;
    let invoice = Invoice { id: 42 };
    let broker = tb.broker::<SqsBroker>();
    let settle = || broker.subscriber("invoices");
    let escalate = || broker.subscriber("invoices-dead");

    tb.broker::<SqsBroker>().message(&invoice).publish().await?;
    settle()
        .assert_called_once()
        .settled(HandlerOutcome::retry_after(recheck));
    tb.advance(recheck).await?;
    settle().assert_called(2);
    tb.advance(recheck).await?;
    settle()
        .assert_called(3)
        .settled(HandlerOutcome::retry_after(recheck));
    escalate().assert_not_called();

    // The third receive was the last the redrive policy allows: when the message is visible
    // again SQS moves it, and it is never handed to `settle` a fourth time.
    tb.advance(recheck).await?;
    settle().assert_called(3);
    escalate()
        .assert_called_once()
        .with(&invoice)
        .settled(HandlerOutcome::ack());
    tb.advance(recheck * 10).await?;
    settle().assert_called(3);
    escalate().assert_called_once();
    tb.shutdown().await?;
    Ok(())
}
