//! Criterion benches for the hot paths of sqs-engine; see `benches/`. Each bench file covers
//! one path, in named groups:
//!
//! - `coalescer`: settlement entries in, batches out;
//! - `heartbeat`: the extension schedule with thousands of deliveries in flight;
//! - `metrics`: the per-message cost of the metrics, with no recorder and with Prometheus's.
//!
//! Run them with `cargo bench -p sqs-engine-benches`.
