//! Sends messages with the native `Publisher`: a standard queue's and a FIFO group's, each
//! answered on its own while they share `SendMessageBatch` calls.
//!
//! ```sh
//! # Against LocalStack (or leave the variables out for AWS and its usual credential chain):
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! aws sqs create-queue --queue-name orders
//! aws sqs create-queue --queue-name payments.fifo --attributes FifoQueue=true
//! cargo run -p sqs-engine --example publish -- orders payments.fifo
//! ```

use futures::future::join_all;
use sqs_engine::{OutgoingMessage, Publisher};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let queue = args.next().unwrap_or_else(|| "orders".to_owned());
    let fifo = args.next().unwrap_or_else(|| "payments.fifo".to_owned());
    let config = aws_config::load_from_env().await;
    let publisher = Publisher::builder().sdk_config(&config).build()?;

    // Twenty sends at once go out in two calls; each gets its own result.
    let sent = join_all((0..20).map(|n| {
        let message = OutgoingMessage::new(format!(r#"{{"order":{n}}}"#))
            .string_attribute("kind", "order-placed");
        publisher.send(&queue, message)
    }))
    .await;
    for (n, result) in sent.into_iter().enumerate() {
        match result {
            Ok(()) => println!("order {n} sent"),
            Err(error) => eprintln!("order {n}: {error}"),
        }
    }

    // A FIFO group keeps the order of its sends.
    for n in 0..3 {
        let message = OutgoingMessage::new(format!(r#"{{"payment":{n}}}"#)).group_id("account-42");
        publisher.send(&fifo, message).await?;
    }

    publisher.close().await;
    Ok(())
}
