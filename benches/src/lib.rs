//! Criterion benches for the hot paths of sqs-engine; see `benches/`. Each bench file covers
//! one path, in named groups:
//!
//! - `coalescer`: settlement entries in, batches out;
//! - `heartbeat`: the extension schedule with thousands of deliveries in flight;
//! - `metrics`: the per-message cost of the metrics, with no recorder and with Prometheus's;
//! - `dispatch`: the receive-to-handler path in process, from a received batch of ten to each
//!   handler's invocation and its settlement queued (`receive_to_handler`);
//! - `end_to_end`: `Engine::run` consuming 2 000 messages from the load test's embedded SQS
//!   server, in process, until every settlement is answered (`end_to_end_embedded`).
//!
//! Run them with `cargo bench -p sqs-engine-benches`.
