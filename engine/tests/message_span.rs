//! The span a message's handler runs in carries OpenTelemetry's messaging fields and the
//! message's trace context. On the in-process SQS (a test double on tokio's clock); a test
//! binary of its own, so that its subscriber is the process's only one.

use std::sync::{Arc, Mutex};

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{Engine, Message, Outcome};
use sqs_engine_test_support::{TRACEPARENT, traced_entry};
use tokio_util::sync::CancellationToken;

/// Collects what the subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_message_span_carries_the_messaging_fields_and_the_trace_context() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .init();
    let sqs = InProcessSqs::new();
    sqs.send_entry("orders", &traced_entry("traced"))
        .expect("sent");
    let done = CancellationToken::new();
    let handler_done = done.clone();
    Engine::builder()
        .api(sqs.clone())
        .queue("orders")
        .build()
        .expect("engine")
        .run(
            move |_message: Message| {
                let done = handler_done.clone();
                async move {
                    tracing::info!("handling");
                    done.cancel();
                    Outcome::Ack
                }
            },
            done.clone().cancelled_owned(),
        )
        .await
        .expect("runs");
    let text = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    let line = text
        .lines()
        .find(|line| line.contains("handling"))
        .unwrap_or_else(|| panic!("the handler's event was logged: {text}"));
    for field in [
        "messaging.system=\"aws_sqs\"",
        "messaging.destination.name=\"orders\"",
        "messaging.message.id=",
        "messaging.sqs.receive_count=1",
        &format!("traceparent=\"{TRACEPARENT}\""),
    ] {
        assert!(line.contains(field), "{field} on the message span: {line}");
    }
}
