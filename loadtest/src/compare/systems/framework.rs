//! The two RustStream brokers compared: the same service (`service.rs`) compiled once per
//! broker, each module bringing its broker's prelude before including it, so the two systems
//! differ only in their `use` lines (the migration the README describes).
//!
//! The brokers do not count their calls: the parent counts them on the server (the embedded
//! server's counters, or LocalStack's log). The settlement is seen through `and_after`, which
//! runs once the broker's settlement returned (for sqs-engine, once the settlement is queued for
//! its batch call), so
//! settlement latency is handler return to that continuation.
//!
//! Each subscription keeps its broker's defaults: one receive loop, and the framework's
//! `workers` bounding the deliveries at once.

/// sqs-engine through its own RustStream broker (the engine's `ruststream` feature).
pub(crate) mod sqs_engine_broker {
    use sqs_engine::prelude::*;

    /// The system's name in messages.
    const SYSTEM: &str = "sqs-engine broker";

    /// Whether a FIFO queue's subscription takes keyed workers: not here, since the engine hands
    /// out a group's next message only once the one before it is settled (docs/broker.md).
    const KEYED_ON_FIFO: bool = false;

    include!("service.rs");
}

/// `ruststream-sqs-sns` 0.7, the framework's current SQS broker.
pub(crate) mod ruststream_sqs_sns {
    use ruststream_sqs_sns::RECEIVE_COUNT_HEADER;
    use ruststream_sqs_sns::prelude::*;

    /// The system's name in messages.
    const SYSTEM: &str = "ruststream-sqs-sns";

    /// Whether a FIFO queue's subscription takes keyed workers: yes, for its group order.
    const KEYED_ON_FIFO: bool = true;

    include!("service.rs");
}
