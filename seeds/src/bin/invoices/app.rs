// The dead-letter seed's entry point and its in-process test, the same for both of its forms:
// included (`include!`) by each form's binary after its `service` and its `RECHECK`. (No inner
// doc comment: this file is included.)

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
