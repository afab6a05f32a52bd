// The dead-letter seed's manual form: its two `Handle` implementations and the service that
// mounts them. The one copy of it, included (`include!`) by the seed binary (`main.rs` here)
// and by the engine's live seed tests, each after its broker's `use <broker>::prelude::*;`, an
// `Invoice` and its own `RECHECK` (how long an invoice that is not ready waits: 5 s in the
// seed, shorter where a real clock runs). Paths are spelled out so that the includer's `use`
// lines cannot clash with this file's. (No inner doc comment: this file is included.)

/// A handler that is never ready. Every delivery asks to come back later, so what ends the
/// message is the cap: the queue hands it over three times and then moves it.
struct Settle;

impl Handle<Invoice> for Settle {
    fn handle(
        &self,
        invoice: &Invoice,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl std::future::Future<Output = Result<(), HandlerOutcome>> {
        tracing::info!(invoice.id, "invoice is not ready yet");
        std::future::ready(Err(HandlerOutcome::retry_after(RECHECK)))
    }
}

/// The dead-letter queue is an ordinary queue, read by an ordinary subscription.
struct Escalate;

impl Handle<Invoice> for Escalate {
    fn handle(
        &self,
        invoice: &Invoice,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl std::future::Future<Output = Result<(), HandlerOutcome>> {
        tracing::error!(invoice.id, "invoice escalated to a person");
        std::future::ready(Ok(()))
    }
}

/// The service on `broker`: `Settle` on `invoices`, with the queue's redrive policy, and
/// `Escalate` on `invoices-dead`.
pub(crate) fn service(broker: SqsBroker) -> impl App {
    RustStream::new(AppInfo::new("invoices", "0.1.0")).with_broker(broker, |b| {
        // The two steps are the queue's redrive policy: `maxReceiveCount` and the
        // dead-letter queue it points at. The subscription writes them when it opens.
        // `undocumented()`: the service is not described in an AsyncAPI document, so a build
        // with the framework's `asyncapi` feature asks no JSON Schema of `Invoice`.
        b.include(
            subscriber("invoices", Settle)
                .undocumented()
                .build()
                .map_source(|_| SqsQueue::new("invoices").create_if_missing()),
        )
        .max_attempts(nonzero!(3u32))
        .dead_letter("invoices-dead");
        b.include(subscriber("invoices-dead", Escalate).undocumented().build());
    })
}
