//! Trace context that joins up (`opentelemetry` feature), live against LocalStack: a producer's
//! span and the consumer's span of the same message belong to one trace, across a real queue.
//! Spans go through `tracing-opentelemetry` to the OpenTelemetry SDK's in-memory exporter.
//!
//! Each test installs its subscriber for its own thread, on a current-thread runtime: the
//! engine's tasks run on that thread, and the tests do not see each other's spans.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_sqs::types::{
    MessageAttributeValue, MessageSystemAttributeNameForSends, MessageSystemAttributeValue,
};
use futures::StreamExt;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, SpanKind, TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use ruststream::{Broker, ConnectedBroker, Subscriber};
use sqs_engine::prelude::*;
use sqs_engine::{BatchOutcome, Engine, Message, Outcome};
use sqs_engine_test_support as support;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

/// A subscriber that exports every span to memory, for the current thread while the guard
/// lives.
struct Traced {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Traced {
    fn install() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("trace_context")));
        let guard = tracing::subscriber::set_default(subscriber);
        Self {
            exporter,
            provider,
            _guard: guard,
        }
    }

    /// Every span finished so far.
    fn spans(&self) -> Vec<SpanData> {
        self.provider.force_flush().expect("flushed");
        self.exporter.get_finished_spans().expect("spans")
    }

    /// The one finished span named `name`.
    fn only(&self, name: &str) -> SpanData {
        let spans = self.spans();
        let mut named = spans.iter().filter(|span| span.name == name);
        let span = named
            .next()
            .unwrap_or_else(|| panic!("a span named {name:?} among {:?}", names(&spans)))
            .clone();
        assert!(named.next().is_none(), "one span named {name:?}");
        span
    }
}

fn names(spans: &[SpanData]) -> Vec<&str> {
    spans.iter().map(|span| &*span.name).collect()
}

/// A producer's span, of the producer kind, and its span context.
fn producer() -> (tracing::Span, SpanContext) {
    let span = tracing::info_span!("send", otel.kind = "producer");
    let context = span.context().span().span_context().clone();
    assert!(context.is_valid(), "the producer's span is recorded");
    (span, context)
}

/// The message attributes another service's W3C propagator writes for `span`.
fn w3c_attributes(span: &tracing::Span) -> HashMap<String, MessageAttributeValue> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut carrier);
    assert!(carrier.contains_key("traceparent"), "{carrier:?}");
    carrier
        .into_iter()
        // SQS refuses an empty attribute: an empty `tracestate` stays off.
        .filter(|(_, value)| !value.is_empty())
        .map(|(name, value)| {
            let value = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
                .expect("attribute");
            (name, value)
        })
        .collect()
}

/// Asserts that `span` is a consumer span whose parent is the remote `producer`.
fn assert_child_of(span: &SpanData, producer: &SpanContext) {
    assert_eq!(span.span_kind, SpanKind::Consumer, "{span:?}");
    assert_eq!(
        span.span_context.trace_id(),
        producer.trace_id(),
        "the producer's trace"
    );
    assert_eq!(
        span.parent_span_id,
        producer.span_id(),
        "the producer's span is the parent"
    );
    assert!(
        span.parent_span_is_remote,
        "the parent came with the message"
    );
}

/// Publishes one message with `headers` to `queue` through the broker, within `span`: the
/// message is queued, with the current span's context, when `publish` is called.
async fn publish_in(span: &tracing::Span, queue: &str, headers: HeaderMap) {
    let broker = SqsBroker::new()
        .api(support::Recording::new(None).await)
        .connect()
        .await
        .expect("connect");
    let message = ruststream::OutgoingMessage::produced(queue, ruststream::BytesMut::from("x"))
        .with_headers(headers);
    let publisher = broker.publisher();
    span.in_scope(|| publisher.publish(message, None))
        .await
        .expect("published");
    broker.shutdown().await.expect("shut down");
}

/// Runs the engine on `queue` until one message was handled, acking it.
async fn handle_one(queue: &str) {
    let config = support::sdk_config().await;
    let done = CancellationToken::new();
    let handled = done.clone();
    let run = Engine::builder()
        .sdk_config(&config)
        .queue(queue)
        .build()
        .expect("engine")
        .run(
            move |_message: Message| {
                let handled = handled.clone();
                async move {
                    handled.cancel();
                    Outcome::Ack
                }
            },
            done.cancelled_owned(),
        );
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("one message handled within 30 s")
        .expect("runs");
}

#[tokio::test]
async fn a_message_published_in_a_producer_span_is_handled_in_a_child_consumer_span() {
    let traced = Traced::install();
    let sqs = support::client().await;
    let queue = support::unique("traced");
    let url = support::create_queue(&sqs, &queue, 30).await;

    // Published through the broker, within the producer's span.
    let (span, producer) = producer();
    publish_in(&span, &queue, HeaderMap::new()).await;

    // Consumed by the native engine.
    handle_one(&queue).await;
    assert_child_of(&traced.only(&format!("process {queue}")), &producer);
    support::delete_queue(&sqs, &url).await;
}

#[tokio::test]
async fn a_broker_delivery_is_handled_in_a_child_of_the_producers_span() {
    let traced = Traced::install();
    let sqs = support::client().await;
    let queue = support::unique("traced-broker");
    let url = support::create_queue(&sqs, &queue, 30).await;
    let (span, producer) = producer();
    sqs.send_message()
        .queue_url(&url)
        .message_body("x")
        .set_message_attributes(Some(w3c_attributes(&span)))
        .send()
        .await
        .expect("sent");

    let broker = SqsBroker::new()
        .api(support::Recording::new(None).await)
        .connect()
        .await
        .expect("connect");
    let mut subscriber = broker
        .subscribe_queue(SqsQueue::new(queue.as_str()))
        .await
        .expect("subscribe");
    {
        let mut stream = std::pin::pin!(subscriber.stream());
        let delivery = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("a delivery within 20 s")
            .expect("the stream goes on")
            .expect("a delivery");
        delivery.ack().await.expect("acked");
    }
    drop(subscriber);
    broker.shutdown().await.expect("shut down");
    assert_child_of(&traced.only(&format!("process {queue}")), &producer);
    support::delete_queue(&sqs, &url).await;
}

#[tokio::test]
async fn an_xray_trace_header_makes_the_pull_consumers_span_a_child_of_the_sender() {
    let traced = Traced::install();
    let sqs = support::client().await;
    let queue = support::unique("traced-xray");
    let url = support::create_queue(&sqs, &queue, 30).await;
    let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    sqs.send_message()
        .queue_url(&url)
        .message_body("x")
        .message_system_attributes(
            MessageSystemAttributeNameForSends::AwsTraceHeader,
            MessageSystemAttributeValue::builder()
                .data_type("String")
                .string_value(header)
                .build()
                .expect("attribute"),
        )
        .send()
        .await
        .expect("sent");

    let config = support::sdk_config().await;
    let mut consumer = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        .build()
        .expect("engine")
        .consumer()
        .await
        .expect("consumer");
    let delivery = tokio::time::timeout(Duration::from_secs(20), consumer.recv())
        .await
        .expect("a delivery within 20 s")
        .expect("a delivery");
    let span = delivery.span();
    async { delivery.settle(Outcome::Ack).await.expect("acked") }
        .instrument(span)
        .await;
    let handle = consumer.handle();
    handle.stop_receiving();
    while consumer.recv().await.is_some() {}
    handle.shutdown().await;

    let span = traced.only(&format!("process {queue}"));
    assert_eq!(span.span_kind, SpanKind::Consumer);
    assert_eq!(
        span.span_context.trace_id().to_string(),
        "5759e988bd862e3fe1be46a994272793",
        "the X-Ray root is the trace"
    );
    assert_eq!(span.parent_span_id.to_string(), "53995c3f42cd8ad8");
    support::delete_queue(&sqs, &url).await;
}

#[tokio::test]
async fn a_batch_handlers_span_links_to_each_messages_sender() {
    let traced = Traced::install();
    let sqs = support::client().await;
    let queue = support::unique("traced-batch");
    let url = support::create_queue(&sqs, &queue, 30).await;
    let mut producers = Vec::new();
    for n in 0..3 {
        let (span, producer) = producer();
        sqs.send_message()
            .queue_url(&url)
            .message_body(format!("m{n}"))
            .set_message_attributes(Some(w3c_attributes(&span)))
            .send()
            .await
            .expect("sent");
        producers.push(producer);
    }

    let config = support::sdk_config().await;
    let done = CancellationToken::new();
    let handled = done.clone();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&seen);
    let run = Engine::builder()
        .sdk_config(&config)
        .queue(queue.as_str())
        .build()
        .expect("engine")
        .run_batches(
            move |messages: Vec<Message>| {
                let handled = handled.clone();
                let counted = std::sync::Arc::clone(&counted);
                async move {
                    let all = counted
                        .fetch_add(messages.len(), std::sync::atomic::Ordering::SeqCst)
                        + messages.len();
                    if all >= 3 {
                        handled.cancel();
                    }
                    BatchOutcome::All(Outcome::Ack)
                }
            },
            done.cancelled_owned(),
        );
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("three messages handled within 30 s")
        .expect("runs");

    let batches: Vec<SpanData> = traced
        .spans()
        .into_iter()
        .filter(|span| span.name == format!("process {queue}"))
        .collect();
    assert!(!batches.is_empty());
    let mut linked: Vec<SpanContext> = Vec::new();
    for batch in &batches {
        assert_eq!(batch.span_kind, SpanKind::Consumer);
        assert!(
            !batch.parent_span_is_remote,
            "a batch has no sender for parent: {batch:?}"
        );
        linked.extend(batch.links.iter().map(|link| link.span_context.clone()));
    }
    let ids = |context: &SpanContext| format!("{}-{}", context.trace_id(), context.span_id());
    let mut linked: Vec<String> = linked.iter().map(ids).collect();
    let mut expected: Vec<String> = producers.iter().map(ids).collect();
    linked.sort();
    expected.sort();
    assert_eq!(linked, expected, "one link to each message's sender");
    support::delete_queue(&sqs, &url).await;
}

#[tokio::test]
async fn headers_that_set_a_traceparent_are_published_as_they_are() {
    let _traced = Traced::install();
    let sqs = support::client().await;
    let queue = support::unique("traced-own");
    let url = support::create_queue(&sqs, &queue, 30).await;
    let own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let mut headers = HeaderMap::new();
    headers.insert(
        "traceparent",
        ruststream::Bytes::from_static(own.as_bytes()),
    );
    let (span, _) = producer();
    publish_in(&span, &queue, headers).await;
    let received = sqs
        .receive_message()
        .queue_url(&url)
        .message_attribute_names("All")
        .wait_time_seconds(5)
        .send()
        .await
        .expect("received");
    let message = received.messages().first().expect("the published message");
    let attributes = message.message_attributes().expect("attributes");
    assert_eq!(
        attributes
            .get("traceparent")
            .and_then(MessageAttributeValue::string_value),
        Some(own)
    );
    support::delete_queue(&sqs, &url).await;
}
