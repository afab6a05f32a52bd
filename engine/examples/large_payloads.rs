//! Bodies too large for SQS, stored in S3 as AWS's extended client libraries store them: the
//! engine fetches each pointer's body before the handler runs, and deletes the object once the
//! message is deleted.
//!
//! A producer may be Java's `amazon-sqs-java-extended-client-lib`, Python's
//! `amazon-sqs-extended-client`, or this crate's broker with `SqsBroker::large_payloads`. A
//! body that cannot be read (its object is missing, say) never reaches the handler: the message
//! is settled by `on_handler_error` with a warning naming the object.
//!
//! ```sh
//! # Against LocalStack (or leave the variables out for AWS and its usual credential chain):
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --features s3 --example large_payloads -- reports
//! ```

use sqs_engine::{Engine, LargePayloads, Message, Outcome};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let queue = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "reports".to_owned());
    let config = aws_config::load_from_env().await;
    // Path-style addressing reaches a local endpoint, which has no bucket subdomains; AWS
    // takes it too.
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    let engine = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        .large_payloads(LargePayloads::new(s3))
        .build()?;
    println!("consuming `{queue}`; Ctrl-C stops");
    engine
        .run(handle, async {
            tokio::signal::ctrl_c().await.unwrap_or(());
        })
        .await?;
    Ok(())
}

/// Prints each body's size and start: a stored body arrives whole, like any other.
async fn handle(message: Message) -> Outcome {
    let body = message.body();
    let start: String = body.chars().take(40).collect();
    println!("{}: {} bytes, {start:?}", message.id(), body.len());
    Outcome::Ack
}
