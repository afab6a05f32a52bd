//! The library side of the load test: the embedded, in-memory SQS server ([`server`]), so
//! that other crates of the workspace (the end-to-end benches of `benches/`) can start it in
//! process. The load test itself is the `loadtest` binary.

pub mod server;
