//! Pausing and resuming receiving while the engine runs: `SIGUSR1` pauses (a downstream
//! service is down for maintenance, say), `SIGUSR2` resumes, Ctrl-C stops. While paused the
//! messages already held finish and stay invisible; nothing new is received.
//!
//! ```sh
//! # Against LocalStack (or leave the variables out for AWS and its usual credential chain):
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --example pause -- jobs &
//! kill -USR1 %1   # pause
//! kill -USR2 %1   # resume
//! ```

use sqs_engine::{Engine, Message, Outcome, PauseHandle};
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let queue = std::env::args().nth(1).unwrap_or_else(|| "jobs".to_owned());
    let config = aws_config::load_from_env().await;
    let engine = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        .build()?;
    // Taken before `run`, which consumes the engine.
    tokio::spawn(control(engine.pause_handle()));
    println!("consuming `{queue}`; SIGUSR1 pauses, SIGUSR2 resumes, Ctrl-C stops");
    engine
        .run(
            |message: Message| async move {
                println!("{}: {}", message.id(), message.body());
                Outcome::Ack
            },
            async {
                tokio::signal::ctrl_c().await.unwrap_or(());
            },
        )
        .await?;
    Ok(())
}

/// Pauses on `SIGUSR1` and resumes on `SIGUSR2`, for as long as the process runs.
async fn control(pause: PauseHandle) -> std::io::Result<()> {
    let mut pauses = signal(SignalKind::user_defined1())?;
    let mut resumes = signal(SignalKind::user_defined2())?;
    loop {
        tokio::select! {
            Some(()) = pauses.recv() => pause.pause(),
            Some(()) = resumes.recv() => pause.resume(),
            else => return Ok(()),
        }
    }
}
