//! Three queues of one service on one pool of workers: `urgent` is served first whenever it
//! has a message waiting, and `normal` and `bulk` share the rest three to one. `bulk` also
//! takes at most 50 messages a second and keeps a small prefetch, so little of it waits for a
//! worker. Ctrl-C stops all three.
//!
//! ```sh
//! # Against LocalStack (or leave the variables out for AWS and its usual credential chain):
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --example priority -- orders
//! ```

use sqs_engine::{Engine, Message, Outcome, Share, WorkerPool};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prefix = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "orders".to_owned());
    let config = aws_config::load_from_env().await;
    let pool = WorkerPool::new(32)?;
    let lane = |suffix: &str, share: Share| {
        Engine::builder()
            .sdk_config(&config)
            .queue(format!("{prefix}-{suffix}"))
            .worker_pool(&pool, share)
    };
    let urgent = lane("urgent", Share::priority(1)).build()?;
    let normal = lane("normal", Share::weight(3)).build()?;
    let bulk = lane("bulk", Share::weight(1))
        .max_receive_rate(50.0)
        .prefetch(10)
        .build()?;

    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            tokio::signal::ctrl_c().await.unwrap_or(());
            stop.cancel();
        }
    });
    println!(
        "consuming {prefix}-urgent, {prefix}-normal and {prefix}-bulk on 32 workers; Ctrl-C stops"
    );
    let handler = |message: Message| async move {
        println!("{}: {}", message.id(), message.body());
        Outcome::Ack
    };
    tokio::try_join!(
        urgent.run(handler, stop.clone().cancelled_owned()),
        normal.run(handler, stop.clone().cancelled_owned()),
        bulk.run(handler, stop.clone().cancelled_owned()),
    )?;
    Ok(())
}
