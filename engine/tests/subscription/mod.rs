//! What the RustStream broker's tests share: a queue created if missing, an outgoing message
//! (and a binary one), a broker connected to LocalStack, the next delivery of a subscription's
//! stream, its quiet, and the end of a test's subscription.

use std::time::Duration;

use futures::{Stream, StreamExt};
use ruststream::{Broker, BytesMut, HeaderMap, OutgoingMessage};
use sqs_engine::ruststream::{ConnectedSqsBroker, SqsBroker};
use sqs_engine_test_support as support;

mod next;
mod queue;
pub(crate) use next::next;
pub(crate) use queue::queue;

/// A message named `name` with `body` and `headers`, as a producer sends it.
pub(crate) fn message<'a>(
    name: &'a str,
    body: &[u8],
    headers: HeaderMap,
) -> OutgoingMessage<'a, BytesMut> {
    OutgoingMessage::produced(name, BytesMut::from(body)).with_headers(headers)
}

/// A binary body, and headers of which one is binary: what the shape tests send.
pub(crate) fn binary_body_and_headers() -> ([u8; 4], HeaderMap) {
    let mut headers = HeaderMap::new();
    headers.insert("tenant", "acme");
    headers.insert("raw", vec![0xffu8, 0x00, 0x7f]);
    ([0xffu8, 0x00, 0x01, b'\n'], headers)
}

/// Waits 3 s on a subscription's stream, which must yield nothing meanwhile; `why` says what
/// the quiet shows.
///
/// # Panics
///
/// When the stream yields or ends within the 3 s.
pub(crate) async fn quiet<S>(stream: &mut S, why: &str)
where
    S: Stream + Unpin,
{
    let more = tokio::time::timeout(Duration::from_secs(3), stream.next()).await;
    assert!(more.is_err(), "{why}");
}

/// Connects to LocalStack with a client of the broker's own.
///
/// # Panics
///
/// When the broker cannot connect.
pub(crate) async fn connect_live() -> ConnectedSqsBroker {
    SqsBroker::new()
        .endpoint(support::endpoint())
        .region("us-east-1")
        .test_credentials()
        .connect()
        .await
        .expect("connect")
}

/// Ends a test's subscription: its stream and the subscriber it borrows go, then the broker
/// shuts down.
///
/// # Panics
///
/// When the shutdown fails.
macro_rules! end {
    ($stream:ident, $subscriber:ident, $connected:ident) => {
        drop($stream);
        drop($subscriber);
        ruststream::ConnectedBroker::shutdown($connected)
            .await
            .expect("shutdown");
    };
}
pub(crate) use end;
