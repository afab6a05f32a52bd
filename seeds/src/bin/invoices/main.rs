//! Seed "Dead letters", the macro form: an invoice that is never ready is received three times
//! and then moves to `invoices-dead`, where a person takes it over. Its subscribers are in
//! `service.rs`, the one copy the engine's live tests include too.

use std::time::Duration;

use sqs_engine::prelude::*;

/// How long an invoice that is not ready waits before it is looked at again.
const RECHECK: Duration = Duration::from_secs(5);

include!("service.rs");

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
