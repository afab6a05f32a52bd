//! A FIFO queue: each message group handled one message at a time, in order, with the
//! workers spread over the groups, until Ctrl-C.
//!
//! Send a few messages to two groups, then run it and watch each group's numbers come out in
//! order while the groups interleave. A body `fail` is retried once: the rest of its group
//! goes back to the queue with it and comes again after it, so the group stays in order.
//!
//! ```sh
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --example fifo -- orders.fifo
//! ```

use std::time::Duration;

use sqs_engine::{Engine, FifoOrder, Message, Outcome};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let queue = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "orders.fifo".to_owned());
    let config = aws_config::load_from_env().await;
    let engine = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        // A name ending in `.fifo` makes a FIFO queue.
        .create_if_missing(true)
        // At most one message per group runs at once; these workers serve many groups.
        .workers(32)
        // The default: the next message of a group starts once SQS confirmed the delete of
        // the one before. `FifoOrder::Outcome` starts it as soon as the handler returned.
        .fifo_order(FifoOrder::Confirmed)
        .build()?;

    println!("consuming `{queue}` group by group; Ctrl-C stops");
    let stats = engine
        .run(handle, async {
            tokio::signal::ctrl_c().await.unwrap_or(());
        })
        .await?;
    println!(
        "acknowledged {}, retried {}, returned to keep a group's order {}",
        stats.acked.ok, stats.retried_after.ok, stats.returned_for_order
    );
    Ok(())
}

async fn handle(message: Message) -> Outcome {
    let group = message.group_id().unwrap_or("(none)").to_owned();
    if message.body() == "fail" && message.receive_count() == 1 {
        println!("{group}: {} failed once, again in 1 s", message.id());
        return Outcome::RetryAfter(Duration::from_secs(1));
    }
    println!("{group}: {}", message.body());
    Outcome::Ack
}
