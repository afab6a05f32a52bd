//! The pull API: [`Engine::consumer`] hands out deliveries and the caller schedules the work,
//! settling each delivery when it is done.
//!
//! Each delivery is split into its message and its ticket, and handled on a task of its own.
//! The consumer never holds more than `workers + prefetch` unsettled messages, so the tasks
//! are bounded without a semaphore. On Ctrl-C the consumer stops receiving (what it received
//! and did not hand out goes back at once), the tasks finish, and `shutdown` sends every
//! settlement.
//!
//! ```sh
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --example pull_consumer -- jobs
//! ```

use std::time::Duration;

use sqs_engine::{Engine, Message, Outcome};
use tokio::task::JoinSet;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let queue = std::env::args().nth(1).unwrap_or_else(|| "jobs".to_owned());
    let config = aws_config::load_from_env().await;
    let mut consumer = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        .create_if_missing(true)
        .workers(32)
        .build()?
        .consumer()
        .await?;
    println!("consuming {}; Ctrl-C stops", consumer.queue_url());

    // The handle stops the receivers from anywhere; here, on Ctrl-C.
    let handle = consumer.handle();
    let stopper = handle.clone();
    tokio::spawn(async move {
        tokio::signal::ctrl_c().await.unwrap_or(());
        println!("stopping: no more receives");
        stopper.stop_receiving();
    });

    let mut tasks = JoinSet::new();
    // `None` once the receivers stopped and every received message was handed out.
    while let Some(delivery) = consumer.recv().await {
        let (message, ticket) = delivery.into_parts();
        tasks.spawn(async move {
            let outcome = work(&message).await;
            // The settlement resolves once SQS has answered for this message.
            if let Err(error) = ticket.settle(outcome).await {
                eprintln!("{}: settling failed: {error}", message.id());
            }
        });
        // Reap finished tasks as we go, so the set stays small.
        while tasks.try_join_next().is_some() {}
    }

    // Every delivery handed out is settled before the consumer shuts down.
    while tasks.join_next().await.is_some() {}
    handle.shutdown().await;

    let stats = handle.stats();
    println!(
        "received {}, settled {} ({} failed); {} SQS calls",
        stats.messages_received,
        stats.settled_ok(),
        stats.settled_failed(),
        stats.total_calls()
    );
    Ok(())
}

/// The work for one message: a stand-in that takes a little while.
async fn work(message: &Message) -> Outcome {
    tokio::time::sleep(Duration::from_millis(50)).await;
    println!("{}: {}", message.id(), message.body());
    Outcome::Ack
}
