//! The services of the settlement documents (`shared/seeds/`), on sqs-engine's RustStream
//! broker. Each binary is a seed's code as written there, but for its `use` line:
//!
//! - `payments`: "Acknowledgement and delivery guarantees" (`book`, `settle_refunds`);
//! - `invoices`: "Dead letters", the macro form;
//! - `invoices-manual`: "Dead letters", the manual form.
//!
//! They compile in CI, which keeps the broker's surface what the seeds use, and this crate
//! turns on the engine's `ruststream` feature for the workspace. Their behaviour is tested
//! against LocalStack in `engine/tests/ruststream_seeds.rs`.
