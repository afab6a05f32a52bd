//! A counting TCP proxy in front of an `http://` SQS endpoint: every byte is passed through
//! unchanged, and the requests a client sends are counted by action (their
//! `X-Amz-Target: AmazonSQS.<Action>` header, the AWS JSON protocol the SDK speaks).
//!
//! It counts exactly the calls of the processes pointed at it, where LocalStack's log counts
//! every process's calls and names no queue: a run on a LocalStack that others use at the same
//! time is counted right.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tracing::debug;

/// The longest request head kept while looking for its end; a longer one is not counted.
const MAX_HEAD: usize = 64 * 1024;

/// Calls by action.
type Counts = Arc<Mutex<BTreeMap<String, u64>>>;

/// A running proxy. Dropping it stops accepting connections.
#[derive(Debug)]
pub(crate) struct CountingProxy {
    /// The endpoint to give clients, e.g. `http://127.0.0.1:40123`.
    endpoint: String,
    /// The requests seen, by action.
    counts: Counts,
    /// The accept loop.
    accept: JoinHandle<()>,
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl CountingProxy {
    /// Starts a proxy on a free loopback port in front of `upstream` (`http://host:port`).
    ///
    /// # Errors
    ///
    /// When `upstream` is not a plain `http://host:port` URL, or no port can be bound.
    pub(crate) async fn start(upstream: &str) -> Result<Self> {
        let Some(authority) = upstream.strip_prefix("http://") else {
            bail!("the counting proxy needs an http:// endpoint, not `{upstream}`");
        };
        let authority = authority.trim_end_matches('/').to_owned();
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the counting proxy")?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let counts = Counts::default();
        let accept = tokio::spawn(accept(listener, authority, Arc::clone(&counts)));
        Ok(Self {
            endpoint,
            counts,
            accept,
        })
    }

    /// The endpoint clients should use.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The requests seen so far, by action.
    pub(crate) fn counts(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Accepts connections and proxies each to `upstream`.
async fn accept(listener: TcpListener, upstream: String, counts: Counts) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let upstream = upstream.clone();
        let counts = Arc::clone(&counts);
        tokio::spawn(async move {
            if let Err(error) = proxy(client, &upstream, counts).await {
                debug!(%error, "counting proxy connection ended");
            }
        });
    }
}

/// Passes one connection through, counting its requests.
async fn proxy(client: TcpStream, upstream: &str, counts: Counts) -> Result<()> {
    let server = TcpStream::connect(upstream).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let responses = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    });
    let mut scanner = RequestScanner::default();
    let mut buffer = vec![0_u8; 32 * 1024];
    loop {
        let read = client_read.read(&mut buffer).await?;
        if read == 0 {
            break;
        }
        server_write.write_all(&buffer[..read]).await?;
        for action in scanner.feed(&buffer[..read]) {
            *counts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(action)
                .or_insert(0) += 1;
        }
    }
    let _ = server_write.shutdown().await;
    let _ = responses.await;
    Ok(())
}

/// Follows the HTTP/1.1 requests of one connection: their heads, and their bodies by
/// `Content-Length`.
#[derive(Debug, Default)]
struct RequestScanner {
    /// The bytes of the current head so far.
    head: Vec<u8>,
    /// The bytes of the current body still to come.
    body_left: usize,
}

impl RequestScanner {
    /// Takes the next bytes of the connection and returns the actions of the requests whose
    /// heads ended in them (`unknown` for a request without `X-Amz-Target`).
    fn feed(&mut self, mut bytes: &[u8]) -> Vec<String> {
        let mut actions = Vec::new();
        while !bytes.is_empty() {
            if self.body_left > 0 {
                let skip = self.body_left.min(bytes.len());
                self.body_left -= skip;
                bytes = &bytes[skip..];
                continue;
            }
            let searched_from = self.head.len().saturating_sub(3);
            self.head.extend_from_slice(bytes);
            bytes = &[];
            let Some(at) = find(&self.head[searched_from..], b"\r\n\r\n") else {
                if self.head.len() > MAX_HEAD {
                    self.head.clear();
                }
                continue;
            };
            let end = searched_from + at + 4;
            let rest = self.head.split_off(end);
            let (action, length) = parse_head(&self.head);
            actions.push(action);
            self.head.clear();
            self.body_left = length;
            // What followed the head: this request's body, then perhaps the next request.
            let skip = self.body_left.min(rest.len());
            self.body_left -= skip;
            self.head.extend_from_slice(&rest[skip..]);
            if self.body_left == 0 && !self.head.is_empty() {
                let pending = std::mem::take(&mut self.head);
                actions.extend(self.feed(&pending));
            }
        }
        actions
    }
}

/// The first position of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The action (`X-Amz-Target`'s part after the dot) and `Content-Length` of a request head.
fn parse_head(head: &[u8]) -> (String, usize) {
    let text = String::from_utf8_lossy(head);
    let mut action = "unknown".to_owned();
    let mut length = 0;
    for line in text.split("\r\n").skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("x-amz-target") {
            action = value.rsplit('.').next().unwrap_or(value).to_owned();
        } else if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().unwrap_or(0);
        }
    }
    (action, length)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(action: &str, body: &str) -> String {
        format!(
            "POST / HTTP/1.1\r\nhost: x\r\nX-Amz-Target: AmazonSQS.{action}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    #[test]
    fn requests_are_counted_however_the_bytes_are_split() {
        let stream = [
            request("ReceiveMessage", "{\"QueueUrl\":\"q\"}"),
            request("DeleteMessageBatch", "{\"Entries\":[]}\r\n\r\n"),
            request("SendMessage", ""),
        ]
        .concat();
        let expected = ["ReceiveMessage", "DeleteMessageBatch", "SendMessage"];
        for chunk in [1, 2, 7, 50, stream.len()] {
            let mut scanner = RequestScanner::default();
            let mut actions = Vec::new();
            for piece in stream.as_bytes().chunks(chunk) {
                actions.extend(scanner.feed(piece));
            }
            assert_eq!(actions, expected, "chunks of {chunk}");
        }
    }
}
