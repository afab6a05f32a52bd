//! What the tests of sqs-engine that run against LocalStack (a real SQS implementation) share:
//! the integration tests of `sqs-engine` (`engine/tests/`) and the crash, shutdown and memory
//! scenarios of `sqs-engine-reliability`.
//!
//! LocalStack is found at `SQS_ENGINE_TEST_ENDPOINT`, else `AWS_ENDPOINT_URL`, else
//! [`DEFAULT_ENDPOINT`]; `scripts/localstack.sh start` runs it. Without it the helpers panic,
//! naming the endpoint they tried. Being test code, they panic on what would fail the test
//! anyway; only [`send_batch`] returns its errors, for a sender that carries on past one.
//!
//! - [`localstack`]: the endpoint, the SDK configuration and client, LocalStack's log.
//! - [`queue`]: queues with names of their own, sending, counting, receiving directly.
//! - [`running`]: an engine on LocalStack, run in the background and stopped; polling until a
//!   condition holds.
//! - [`recording`]: an [`SqsApi`](sqs_engine::SqsApi) that records the batch calls the engine
//!   makes and what SQS answered.
//! - [`answered`]: an [`SqsApi`](sqs_engine::SqsApi) whose deletes or visibility changes the
//!   test answers.
//! - [`proxy`]: a fault-injecting HTTP proxy between the engine and LocalStack.
//! - [`ledger`]: ledgers of processed message ids and what they say about the messages sent.
//! - [`trace`]: a message that carries a trace context.
//!
//! Everything but the proxy is also at the crate's root.

pub mod answered;
pub mod ledger;
pub mod localstack;
pub mod log_capture;
pub mod proxy;
pub mod queue;
pub mod recording;
pub mod running;
pub mod trace;

pub use answered::Answered;
pub use localstack::{
    DEFAULT_ENDPOINT, client, client_at, endpoint, localstack_log_path, logged_calls, read_log,
    sdk_config, sdk_config_at,
};
pub use log_capture::LogCapture;
pub use queue::{
    counts, create_fifo_queue, create_queue, delete_queue, queue_url, receive_raw, send,
    send_batch, send_grouped, send_ids, unique,
};
pub use recording::{BatchCall, INVALID_RECEIPT, Record, Recording};
pub use running::{
    Running, ack_until_handled, builder, counting_acks, eventually, spawn_batch_engine,
    spawn_engine,
};
pub use trace::{TRACEPARENT, traced_entry};
