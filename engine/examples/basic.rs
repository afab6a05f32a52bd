//! The native API: one handler call per message, until Ctrl-C.
//!
//! The handler acknowledges bodies that parse as a number and asks for the others again in
//! 30 seconds. On Ctrl-C the engine stops receiving, lets running handlers finish, sends every
//! settlement, and returns its counts.
//!
//! ```sh
//! # Against LocalStack (or leave the variables out for AWS and its usual credential chain):
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --example basic -- orders
//! ```

use std::time::Duration;

use sqs_engine::{Engine, Message, Outcome};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let queue = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "orders".to_owned());
    // Credentials, region and `AWS_ENDPOINT_URL`, as the AWS SDK resolves them.
    let config = aws_config::load_from_env().await;
    let engine = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        // Handy for trying it out; a production queue is usually made by its infrastructure.
        .create_if_missing(true)
        .workers(16)
        .build()?;

    println!("consuming `{queue}`; Ctrl-C stops");
    let stats = engine
        .run(handle, async {
            tokio::signal::ctrl_c().await.unwrap_or(());
        })
        .await?;

    println!(
        "received {}, acknowledged {}, retried later {}; {} SQS calls",
        stats.messages_received,
        stats.acked.ok,
        stats.retried_after.ok,
        stats.total_calls()
    );
    Ok(())
}

/// Decides each message's fate. Any `Fn(Message) -> impl Future<Output = Outcome>` will do.
async fn handle(message: Message) -> Outcome {
    match message.body().trim().parse::<i64>() {
        Ok(number) => {
            println!("{}: {number}", message.id());
            Outcome::Ack
        }
        Err(_) => {
            println!(
                "{}: not a number (receive {}), again in 30 s",
                message.id(),
                message.receive_count()
            );
            Outcome::RetryAfter(Duration::from_secs(30))
        }
    }
}
