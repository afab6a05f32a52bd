//! A counting TCP proxy in front of an `http://` SQS (and SNS) endpoint: every byte is passed
//! through unchanged, and the requests a client sends are counted by action: an SQS call by its
//! `X-Amz-Target: AmazonSQS.<Action>` header (the AWS JSON protocol `aws-sdk-sqs` speaks), an
//! SNS call by the `Action=<Action>` field that starts its form-encoded body (the AWS Query
//! protocol `aws-sdk-sns` speaks).
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

/// The most bytes of a form-encoded body kept while looking for the end of its `Action` field.
const MAX_ACTION_FIELD: usize = 256;

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
    /// The start of a form-encoded body so far, while its `Action` field is looked for.
    form: Option<Vec<u8>>,
}

impl RequestScanner {
    /// Takes the next bytes of the connection and returns the actions of the requests
    /// identified in them (`unknown` for a request with neither an `X-Amz-Target` header nor
    /// an `Action` field).
    fn feed(&mut self, mut bytes: &[u8]) -> Vec<String> {
        let mut actions = Vec::new();
        while !bytes.is_empty() {
            if self.body_left > 0 {
                let skip = self.body_left.min(bytes.len());
                self.body(&bytes[..skip], skip == self.body_left, &mut actions);
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
            let head = parse_head(&self.head);
            self.head.clear();
            match head.action {
                Some(action) => actions.push(action),
                None if head.form && head.length > 0 => self.form = Some(Vec::new()),
                None => actions.push("unknown".to_owned()),
            }
            self.body_left = head.length;
            // What followed the head: this request's body, then perhaps the next request.
            let skip = self.body_left.min(rest.len());
            self.body(&rest[..skip], skip == self.body_left, &mut actions);
            self.body_left -= skip;
            self.head.extend_from_slice(&rest[skip..]);
            if self.body_left == 0 && !self.head.is_empty() {
                let pending = std::mem::take(&mut self.head);
                actions.extend(self.feed(&pending));
            }
        }
        actions
    }

    /// Takes bytes of the current body (`last`: its end); a form-encoded body's action is
    /// pushed once its `Action` field has ended.
    fn body(&mut self, bytes: &[u8], last: bool, actions: &mut Vec<String>) {
        let Some(form) = self.form.as_mut() else {
            return;
        };
        let room = MAX_ACTION_FIELD.saturating_sub(form.len());
        form.extend_from_slice(&bytes[..room.min(bytes.len())]);
        if last || form.contains(&b'&') || form.len() >= MAX_ACTION_FIELD {
            actions.push(query_action(form).unwrap_or_else(|| "unknown".to_owned()));
            self.form = None;
        }
    }
}

/// The value of the `Action` field of the start of a form-encoded body, when it ended there.
fn query_action(form: &[u8]) -> Option<String> {
    form_urlencoded::parse(form)
        .find(|(name, _)| name == "Action")
        .map(|(_, value)| value.into_owned())
        .filter(|value| !value.is_empty())
}

/// The first position of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// What a request head tells.
#[derive(Debug)]
struct Head {
    /// The action of its `X-Amz-Target` (the part after the dot), when it has one.
    action: Option<String>,
    /// Whether its body is form-encoded.
    form: bool,
    /// Its `Content-Length`.
    length: usize,
}

/// The action (`X-Amz-Target`'s part after the dot), content type and `Content-Length` of a
/// request head.
fn parse_head(head: &[u8]) -> Head {
    let text = String::from_utf8_lossy(head);
    let mut parsed = Head {
        action: None,
        form: false,
        length: 0,
    };
    for line in text.split("\r\n").skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("x-amz-target") {
            parsed.action = Some(value.rsplit('.').next().unwrap_or(value).to_owned());
        } else if name.eq_ignore_ascii_case("content-length") {
            parsed.length = value.parse().unwrap_or(0);
        } else if name.eq_ignore_ascii_case("content-type") {
            parsed.form = value.starts_with("application/x-www-form-urlencoded");
        }
    }
    parsed
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

    fn query(body: &str) -> String {
        format!(
            "POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    #[test]
    fn requests_are_counted_however_the_bytes_are_split() {
        let stream = [
            request("ReceiveMessage", "{\"QueueUrl\":\"q\"}"),
            query("Action=PublishBatch&Version=2010-03-31&TopicArn=arn%3Aaws%3Asns"),
            request("DeleteMessageBatch", "{\"Entries\":[]}\r\n\r\n"),
            query("Action=CreateTopic"),
            request("SendMessage", ""),
            query("Version=2010-03-31"),
        ]
        .concat();
        let expected = [
            "ReceiveMessage",
            "PublishBatch",
            "DeleteMessageBatch",
            "CreateTopic",
            "SendMessage",
            "unknown",
        ];
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
