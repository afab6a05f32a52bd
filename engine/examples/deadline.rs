//! Handlers with a deadline: a handler still running after `max_processing_time` is cancelled
//! and its message settled by `on_processing_timeout`, and the heartbeat keeps no message
//! invisible past `max_extension`, so a hung handler cannot hold a message for 12 hours.
//!
//! Bodies are read as a number of seconds to work; past 10 s the handler is cancelled and
//! its message comes back after a minute (`RetryAfter`), its receive count one higher.
//!
//! ```sh
//! # Against LocalStack (or leave the variables out for AWS and its usual credential chain):
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --example deadline -- jobs
//! ```

use std::time::Duration;

use sqs_engine::{Engine, Message, Outcome};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let queue = std::env::args().nth(1).unwrap_or_else(|| "jobs".to_owned());
    let config = aws_config::load_from_env().await;
    let engine = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        .max_processing_time(Duration::from_secs(10))
        .on_processing_timeout(Outcome::RetryAfter(Duration::from_secs(60)))
        .max_extension(Duration::from_secs(15 * 60))
        .build()?;
    println!("consuming `{queue}`; Ctrl-C stops");
    engine
        .run(work, async {
            tokio::signal::ctrl_c().await.unwrap_or(());
        })
        .await?;
    Ok(())
}

/// Works for as many seconds as the body says.
async fn work(message: Message) -> Outcome {
    let seconds = message.body().trim().parse().unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    println!("{} done after {seconds} s", message.id());
    Outcome::Ack
}
