//! A queue subscribed to an SNS topic without raw message delivery: each body is SNS's JSON
//! envelope, and `Message::sns_notification` unwraps it into the published message, its
//! subject, topic and message attributes.
//!
//! A body that is not a notification (a message sent to the queue directly, say) is an error
//! the handler returns with `?`: the engine logs it and returns the message after a backoff
//! (`on_handler_error`), and a dead-letter queue takes it after `max_attempts`.
//!
//! ```sh
//! # Against LocalStack (or leave the variables out for AWS and its usual credential chain):
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --example sns_envelope -- order-events
//! ```

use sqs_engine::{Engine, Message, SnsEnvelopeError};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let queue = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "order-events".to_owned());
    let config = aws_config::load_from_env().await;
    let engine = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        .build()?;
    println!("consuming `{queue}`; Ctrl-C stops");
    engine
        .run(handle, async {
            tokio::signal::ctrl_c().await.unwrap_or(());
        })
        .await?;
    Ok(())
}

/// Prints each notification; `Ok(())` acknowledges it.
async fn handle(message: Message) -> Result<(), SnsEnvelopeError> {
    let notification = message.sns_notification()?;
    let tenant = notification
        .message_attributes
        .get("tenant")
        .and_then(|attribute| attribute.as_str())
        .unwrap_or("-");
    println!(
        "{} from {} (subject {:?}, tenant {tenant}): {}",
        notification.message_id,
        notification.topic_arn,
        notification.subject.as_deref().unwrap_or(""),
        notification.message
    );
    Ok(())
}
