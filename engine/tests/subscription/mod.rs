//! What the RustStream broker's tests share: a queue created if missing, an outgoing message
//! (and a binary one), the next delivery of a subscription's stream and its quiet.

use std::time::Duration;

use futures::{Stream, StreamExt};
use ruststream::{BytesMut, HeaderMap, OutgoingMessage};

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
