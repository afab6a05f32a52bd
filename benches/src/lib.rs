//! Criterion benches for sqs-engine live in `benches/`; this library is empty.
