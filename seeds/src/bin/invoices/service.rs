// The dead-letter seed's macro form: its message, its two subscribers and the service that
// mounts them. The one copy of it, included (`include!`) by the seed binary (`main.rs` here)
// and by the engine's live seed tests, each after its broker's `use <broker>::prelude::*;` and
// its own `RECHECK` (how long an invoice that is not ready waits: 5 s in the seed, shorter
// where a real clock runs). Paths are spelled out so that the includer's `use` lines cannot
// clash with this file's. (No inner doc comment: this file is included.)

/// An invoice to settle.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, Outgoing)]
#[outgoing(name = "invoices")]
pub(crate) struct Invoice {
    /// The invoice number.
    pub(crate) id: u64,
}

/// A handler that is never ready. Every delivery asks to come back later, so what ends the
/// message is the cap: the queue hands it over three times and then moves it.
#[subscriber(SqsQueue::new("invoices").create_if_missing())]
async fn settle(invoice: &Invoice) -> HandlerOutcome {
    tracing::info!(invoice.id, "invoice is not ready yet");
    HandlerOutcome::retry_after(RECHECK)
}

/// The dead-letter queue is an ordinary queue, read by an ordinary subscription.
#[subscriber("invoices-dead")]
async fn escalate(invoice: &Invoice) -> HandlerOutcome {
    tracing::error!(invoice.id, "invoice escalated to a person");
    HandlerOutcome::ack()
}

/// The service on `broker`: `settle` on `invoices`, with the queue's redrive policy, and
/// `escalate` on `invoices-dead`.
pub(crate) fn service(broker: SqsBroker) -> impl App {
    RustStream::new(AppInfo::new("invoices", "0.1.0")).with_broker(broker, |b| {
        // The two steps are the queue's redrive policy: `maxReceiveCount` and the
        // dead-letter queue it points at. The subscription writes them when it opens.
        b.include(settle)
            .max_attempts(nonzero!(3u32))
            .dead_letter("invoices-dead");
        b.include(escalate);
    })
}
