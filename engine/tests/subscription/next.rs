//! The next delivery of a subscription's stream; its own file, so that a test target that needs
//! only it includes only it.

use std::time::Duration;

use futures::{Stream, StreamExt};
use sqs_engine::prelude::SqsMessage;

/// The next delivery of a subscription's stream, within 20 s; `what` names it if none comes.
///
/// # Panics
///
/// When none comes within 20 s, the stream ends, or it yields an error.
pub(crate) async fn next<S, E>(stream: &mut S, what: &str) -> SqsMessage
where
    S: Stream<Item = Result<SqsMessage, E>> + Unpin,
    E: std::fmt::Debug,
{
    tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .unwrap_or_else(|_| panic!("no {what} within 20 s"))
        .expect("the stream goes on")
        .unwrap_or_else(|error| panic!("{what}: {error:?}"))
}
