//! The payments service of [`service.rs`](self) and its fan-out variant of
//! `fan_out_service.rs`, each compiled once per broker: each module brings its broker's prelude
//! and then includes the same file, so the two differ only in the `use` lines (the migration the
//! README describes).

/// The payments service on sqs-engine's RustStream broker.
pub(crate) mod sqs_engine_broker {
    use sqs_engine::prelude::*;

    include!("service.rs");
}

/// The payments service on `ruststream-sqs-sns` 0.7.
pub(crate) mod sqs_sns_broker {
    use ruststream_sqs_sns::RECEIVE_COUNT_HEADER;
    use ruststream_sqs_sns::prelude::*;

    include!("service.rs");
}

/// The fan-out variant of the payments service on sqs-engine's RustStream broker.
pub(crate) mod sqs_engine_fan_out {
    use sqs_engine::prelude::*;

    include!("fan_out_service.rs");
}

/// The fan-out variant of the payments service on `ruststream-sqs-sns` 0.7.
pub(crate) mod sqs_sns_fan_out {
    use ruststream_sqs_sns::RECEIVE_COUNT_HEADER;
    use ruststream_sqs_sns::prelude::*;

    include!("fan_out_service.rs");
}
