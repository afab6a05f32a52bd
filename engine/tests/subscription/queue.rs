//! The queue the RustStream broker's tests subscribe to; its own file, so that a test target
//! that needs only the queue includes only it.

use std::time::Duration;

use sqs_engine::prelude::SqsQueue;

/// The queue `name`, created if missing, long-polled for a second, so that subscriptions stop
/// quickly.
pub(crate) fn queue(name: &str) -> SqsQueue {
    SqsQueue::new(name)
        .create_if_missing()
        .wait(Duration::from_secs(1))
}
