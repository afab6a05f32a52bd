//! Trace context that joins up (`opentelemetry` feature): a producer's span, carried as a W3C
//! `traceparent` message attribute, becomes the parent of the span the handler runs in.
//!
//! The subscriber has a `tracing-opentelemetry` layer over an OpenTelemetry SDK tracer; a
//! service would export with OTLP (`opentelemetry-otlp`), this example prints each finished
//! span. The producer here is another service's view: the AWS SDK and the SDK's W3C
//! propagator, no sqs-engine; the broker's publishers carry the context by themselves.
//!
//! ```sh
//! export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//!   AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
//! cargo run -p sqs-engine --features opentelemetry --example opentelemetry -- traced
//! ```

use std::collections::HashMap;

use aws_sdk_sqs::types::MessageAttributeValue;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use sqs_engine::{Engine, Message, Outcome};
use tokio_util::sync::CancellationToken;
use tracing::Level;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Layer as _, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Prints each finished span: its name, kind, trace, and parent.
#[derive(Debug)]
struct Print;

impl SpanExporter for Print {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        for span in batch {
            println!(
                "{:<16} {:?}\ttrace {} span {} parent {}",
                span.name,
                span.span_kind,
                span.span_context.trace_id(),
                span.span_context.span_id(),
                span.parent_span_id,
            );
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let queue = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "traced".to_owned());
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(Print)
        .build();
    // The engine's spans and this example's, not the AWS SDK's own.
    let spans = Targets::new()
        .with_target("sqs_engine", Level::INFO)
        .with_target(module_path!(), Level::INFO);
    tracing_subscriber::registry()
        .with(
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("example"))
                .with_filter(spans),
        )
        .init();
    let config = aws_config::load_from_env().await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let url = sqs
        .create_queue()
        .queue_name(&queue)
        .send()
        .await?
        .queue_url
        .ok_or("CreateQueue answered without a URL")?;

    // The producer: its span's context goes on the message as `traceparent`.
    {
        let producer = tracing::info_span!("send", otel.kind = "producer");
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(&producer.context(), &mut carrier);
        let mut send = sqs.send_message().queue_url(&url).message_body("traced");
        // SQS refuses an empty attribute: an empty `tracestate` stays off.
        for (name, value) in carrier.into_iter().filter(|(_, value)| !value.is_empty()) {
            let value = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()?;
            send = send.message_attributes(name, value);
        }
        send.send().await?;
    }

    // The consumer: the handler's span is a child of the producer's.
    let done = CancellationToken::new();
    let handled = done.clone();
    Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        .build()?
        .run(
            move |message: Message| {
                let handled = handled.clone();
                async move {
                    tracing::info!(body = message.body(), "handling");
                    handled.cancel();
                    Outcome::Ack
                }
            },
            done.cancelled_owned(),
        )
        .await?;
    provider.shutdown()?;
    Ok(())
}
