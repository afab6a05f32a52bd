//! The Prometheus exporter (feature `prometheus`): the engine's metrics on `/metrics`.
//!
//! [`sqs_engine::prometheus::install`] sets the global `metrics` recorder and serves
//! `/metrics` on `127.0.0.1:9464` unless told another address. The names, kinds and labels of
//! every metric are listed in [`sqs_engine::metrics`].
//!
//! ```sh
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --features prometheus --example prometheus -- orders 127.0.0.1:9464
//! curl -s http://127.0.0.1:9464/metrics | grep '^sqs_engine_'
//! ```

use std::net::SocketAddr;

use sqs_engine::{Engine, Message, Outcome};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let queue = args.next().unwrap_or_else(|| "orders".to_owned());
    let addr: Option<SocketAddr> = args.next().map(|addr| addr.parse()).transpose()?;

    // Once per process, inside the runtime, before the engine starts.
    sqs_engine::prometheus::install(addr)?;
    let addr = addr.unwrap_or(sqs_engine::prometheus::DEFAULT_ADDR);
    println!("metrics on http://{addr}/metrics");

    let config = aws_config::load_from_env().await;
    let engine = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        .create_if_missing(true)
        .build()?;
    println!("consuming `{queue}`; Ctrl-C stops");
    engine
        .run(|_message: Message| async { Outcome::Ack }, async {
            tokio::signal::ctrl_c().await.unwrap_or(());
        })
        .await?;
    Ok(())
}
