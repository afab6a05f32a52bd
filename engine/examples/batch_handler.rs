//! `run_batches`: the messages of each receive call (up to ten) reach the handler together,
//! for work that is cheaper in bulk (one database transaction, one downstream request).
//!
//! The handler sums the numeric bodies of a batch. When every body is a number it settles the
//! whole batch with one outcome; otherwise it answers per message, in order: the numbers are
//! acknowledged and the rest dropped (deleted), since trying them again would not help.
//!
//! ```sh
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --example batch_handler -- readings
//! ```

use sqs_engine::{BatchOutcome, Engine, Message, Outcome};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let queue = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "readings".to_owned());
    let config = aws_config::load_from_env().await;
    let engine = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        .create_if_missing(true)
        // With a batch handler, each worker holds one receive batch.
        .workers(8)
        .build()?;

    println!("consuming `{queue}` a receive batch at a time; Ctrl-C stops");
    let stats = engine
        .run_batches(handle_batch, async {
            tokio::signal::ctrl_c().await.unwrap_or(());
        })
        .await?;

    println!(
        "received {} in {} receive calls; acknowledged {}, dropped {}; {} delete calls",
        stats.messages_received,
        stats.receive_message.ok,
        stats.acked.ok,
        stats.dropped.ok,
        stats.delete_message_batch.total()
    );
    Ok(())
}

/// Handles one receive batch: one outcome for all, or one per message in the order given.
async fn handle_batch(messages: Vec<Message>) -> BatchOutcome {
    let numbers: Vec<Option<i64>> = messages
        .iter()
        .map(|message| message.body().trim().parse().ok())
        .collect();
    let sum: i64 = numbers.iter().flatten().sum();
    println!("batch of {}: sum {sum}", messages.len());

    if numbers.iter().all(Option::is_some) {
        BatchOutcome::All(Outcome::Ack)
    } else {
        BatchOutcome::Each(
            numbers
                .iter()
                .map(|number| match number {
                    Some(_) => Outcome::Ack,
                    None => Outcome::Drop,
                })
                .collect(),
        )
    }
}
