//! Seed "Dead letters", the manual form: the same service with `Handle` implementations.

use std::future::{Future, ready};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqs_engine::prelude::*;

/// How long an invoice that is not ready waits before it is looked at again.
const RECHECK: Duration = Duration::from_secs(5);

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Invoice {
    id: u64,
}

/// A handler that is never ready. Every delivery asks to come back later, so what ends the
/// message is the cap: the queue hands it over three times and then moves it.
struct Settle;

impl Handle<Invoice> for Settle {
    fn handle(
        &self,
        invoice: &Invoice,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        tracing::info!(invoice.id, "invoice is not ready yet");
        ready(Err(HandlerOutcome::retry_after(RECHECK)))
    }
}

/// The dead-letter queue is an ordinary queue, read by an ordinary subscription.
struct Escalate;

impl Handle<Invoice> for Escalate {
    fn handle(
        &self,
        invoice: &Invoice,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        tracing::error!(invoice.id, "invoice escalated to a person");
        ready(Ok(()))
    }
}

fn service(broker: SqsBroker) -> impl App {
    RustStream::new(AppInfo::new("invoices", "0.1.0")).with_broker(broker, |b| {
        // The two steps are the queue's redrive policy: `maxReceiveCount` and the
        // dead-letter queue it points at. The subscription writes them when it opens.
        // `undocumented()`: the service is not described in an AsyncAPI document, so a build
        // with the framework's `asyncapi` feature asks no JSON Schema of `Invoice`.
        b.include(
            subscriber("invoices", Settle)
                .undocumented()
                .build()
                .map_source(|_| SqsQueue::new("invoices").create_if_missing()),
        )
        .max_attempts(nonzero!(3u32))
        .dead_letter("invoices-dead");
        b.include(subscriber("invoices-dead", Escalate).undocumented().build());
    })
}

#[ruststream::app]
fn app() -> impl App {
    service(
        SqsBroker::new()
            .endpoint("http://localhost:4566")
            .region("us-east-1")
            .test_credentials(),
    )
}

// The service's test, in process on a paused clock (see the `sqs_engine_seeds` library).
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_invoice_never_ready_moves_to_the_dead_letter_queue()
    -> Result<(), Box<dyn std::error::Error>> {
        sqs_engine_seeds::an_invoice_never_ready_moves_to_the_dead_letter_queue(app(), RECHECK)
            .await
    }
}
