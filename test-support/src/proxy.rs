//! A fault-injecting HTTP proxy between the engine and LocalStack.
//!
//! `aws-sdk-sqs` speaks AWS JSON 1.0: every call is `POST /` with the action in the
//! `X-Amz-Target` header (`AmazonSQS.ReceiveMessage`), so the proxy knows each call's action
//! without parsing its body. Everything is configurable while it runs:
//!
//! - [`Proxy::inject`]: answer a share of the calls of one action (or of all) with a [`Fault`]:
//!   throttling as SQS reports it, HTTP 500 or 503, or a connection reset with no answer. The
//!   share is drawn from a seeded pseudo-random sequence, so a run with the same seed and the
//!   same order of calls injects the same faults.
//! - [`Proxy::set_latency`]: delay every call, faults included.
//! - [`Proxy::outage`]: for a while, reset every open connection and every new one as soon as it
//!   is accepted, counting them: the engine sees its connections fail, as when SQS is out of
//!   reach.
//!
//! [`Proxy::counts`] says what was forwarded and what was injected, per action, and
//! [`Proxy::attempt_ids`] the attempt id of every receive.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What the proxy answers instead of forwarding a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// HTTP 400 with the JSON error type `ThrottlingException`, as AWS's front end answers a
    /// call over the rate limit.
    Throttling,
    /// HTTP 400 with SQS's own throttling code, `RequestThrottled`, in the body and in the
    /// `x-amzn-query-error` header (which `aws-sdk-sqs` prefers for the error code).
    RequestThrottled,
    /// HTTP 500 `InternalError`.
    InternalError,
    /// HTTP 503 `ServiceUnavailable`.
    ServiceUnavailable,
    /// The request is read and the connection is reset (RST) without an answer.
    Reset,
    /// The request is read and never answered, nor forwarded: the connection stays open and
    /// silent, as one that went half-open does.
    Silence,
}

impl Fault {
    /// Throttling and 5xx, the faults SQS answers with.
    pub const ANSWERED: [Fault; 4] = [
        Fault::Throttling,
        Fault::RequestThrottled,
        Fault::InternalError,
        Fault::ServiceUnavailable,
    ];

    /// The fault's short name, for tables and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Throttling => "throttling",
            Fault::RequestThrottled => "request_throttled",
            Fault::InternalError => "500",
            Fault::ServiceUnavailable => "503",
            Fault::Reset => "reset",
            Fault::Silence => "silence",
        }
    }

    /// The status, `x-amzn-query-error` header and JSON body of an answered fault.
    fn answer(self) -> Option<(StatusCode, Option<&'static str>, &'static str)> {
        Some(match self {
            Fault::Throttling => (
                StatusCode::BAD_REQUEST,
                None,
                r#"{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate exceeded"}"#,
            ),
            Fault::RequestThrottled => (
                StatusCode::BAD_REQUEST,
                Some("RequestThrottled;Sender"),
                r#"{"__type":"com.amazonaws.sqs#RequestThrottled","message":"Request is throttled."}"#,
            ),
            Fault::InternalError => (
                StatusCode::INTERNAL_SERVER_ERROR,
                Some("InternalError;Receiver"),
                r#"{"__type":"com.amazonaws.sqs#InternalError","message":"We encountered an internal error. Please try again."}"#,
            ),
            Fault::ServiceUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                Some("ServiceUnavailable;Receiver"),
                r#"{"__type":"com.amazonaws.sqs#ServiceUnavailable","message":"The request has failed due to a temporary failure of the server."}"#,
            ),
            Fault::Reset | Fault::Silence => return None,
        })
    }
}

/// Injects one of `faults` into a share `rate` of the calls of `action` (`None`: every action).
#[derive(Debug, Clone)]
struct Rule {
    action: Option<String>,
    rate: f64,
    faults: Vec<Fault>,
}

/// What the proxy did with the calls of one action.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionCounts {
    /// Forwarded to LocalStack and answered with its response.
    pub forwarded: u64,
    /// Answered (or reset) by the proxy instead, by fault.
    pub injected: BTreeMap<Fault, u64>,
    /// Arrived on a connection during an outage, and reset.
    pub refused: u64,
    /// Forwarded, but LocalStack did not answer (answered 502).
    pub upstream_failed: u64,
}

impl ActionCounts {
    /// Calls answered (or reset) by the proxy instead, every fault together.
    pub fn injected_total(&self) -> u64 {
        self.injected.values().sum()
    }

    /// Every call that reached the proxy and did not get LocalStack's answer.
    pub fn failed(&self) -> u64 {
        self.injected_total() + self.refused + self.upstream_failed
    }
}

/// What the proxy did, per action and per connection.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    /// Per action (`ReceiveMessage`, `DeleteMessageBatch`, ...).
    pub actions: BTreeMap<String, ActionCounts>,
    /// Connections accepted and served.
    pub connections: u64,
    /// Connections reset as soon as they were accepted, during an outage.
    pub refused_connections: u64,
    /// Open connections reset when an outage began.
    pub killed_connections: u64,
}

impl Counts {
    /// The counts of `action` (zeros when it was never called).
    pub fn action(&self, action: &str) -> ActionCounts {
        self.actions.get(action).cloned().unwrap_or_default()
    }

    /// Calls forwarded to LocalStack and answered, every action together.
    pub fn forwarded(&self) -> u64 {
        self.actions.values().map(|a| a.forwarded).sum()
    }

    /// Calls answered (or reset) by the proxy instead, every action together.
    pub fn injected(&self) -> u64 {
        self.actions
            .values()
            .map(ActionCounts::injected_total)
            .sum()
    }

    /// Calls refused during an outage plus connections refused before a call could be read.
    pub fn refused(&self) -> u64 {
        self.actions.values().map(|a| a.refused).sum::<u64>() + self.refused_connections
    }
}

struct Shared {
    upstream: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    seed: u64,
    draws: AtomicU64,
    rules: Mutex<Vec<Rule>>,
    latency: Mutex<Duration>,
    outage_until: Mutex<Option<Instant>>,
    /// Every connection's token is a child of this one: cancelling it resets them all.
    connections: Mutex<CancellationToken>,
    /// Connections being served.
    live: AtomicU64,
    counts: Mutex<Counts>,
    /// The `ReceiveRequestAttemptId` of every `ReceiveMessage` request, in arrival order.
    attempt_ids: Mutex<Vec<Option<String>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// SplitMix64: a small, well-mixed sequence, enough to spread faults evenly and repeatably.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl Shared {
    /// The next number of the seeded sequence, in `0.0..1.0`.
    fn draw(&self) -> f64 {
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let x = splitmix64(self.seed ^ n.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    fn in_outage(&self) -> bool {
        lock(&self.outage_until).is_some_and(|until| Instant::now() < until)
    }

    fn fault_for(&self, action: &str) -> Option<Fault> {
        let rules = lock(&self.rules).clone();
        for rule in rules {
            if rule.action.as_deref().is_some_and(|a| a != action) || rule.faults.is_empty() {
                continue;
            }
            if self.draw() < rule.rate {
                let pick = (self.draw() * rule.faults.len() as f64) as usize;
                return Some(rule.faults[pick.min(rule.faults.len() - 1)]);
            }
        }
        None
    }

    fn count(&self, action: &str, update: impl FnOnce(&mut ActionCounts)) {
        let mut counts = lock(&self.counts);
        update(counts.actions.entry(action.to_owned()).or_default());
    }
}

/// The proxy, listening on `127.0.0.1` on a port of its own. Stops when dropped.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        lock(&self.shared.connections).cancel();
    }
}

impl Proxy {
    /// A proxy in front of the test endpoint (LocalStack), with a fixed seed.
    pub async fn start() -> Self {
        Self::start_with_seed(0x5eed_0f5e_c0de).await
    }

    /// A proxy in front of the test endpoint whose faults are drawn from `seed`.
    pub async fn start_with_seed(seed: u64) -> Self {
        let upstream: Uri = crate::localstack::endpoint()
            .parse()
            .expect("the test endpoint is a URI");
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the proxy binds a local port");
        let addr = listener.local_addr().expect("a local address");
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        let shared = Arc::new(Shared {
            upstream,
            client,
            seed,
            draws: AtomicU64::new(0),
            rules: Mutex::default(),
            latency: Mutex::default(),
            outage_until: Mutex::default(),
            connections: Mutex::new(CancellationToken::new()),
            live: AtomicU64::new(0),
            counts: Mutex::default(),
            attempt_ids: Mutex::default(),
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Self {
            addr,
            shared,
            accept,
        }
    }

    /// The endpoint to give the SDK.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on, answers a share `rate` (0.0..=1.0) of the calls of `action` (`None`: of
    /// every action) with one of `faults`, picked evenly. Rules add up: a call goes through
    /// them in order until one injects.
    pub fn inject(&self, action: Option<&str>, rate: f64, faults: &[Fault]) {
        assert!((0.0..=1.0).contains(&rate), "a rate in 0.0..=1.0");
        lock(&self.shared.rules).push(Rule {
            action: action.map(str::to_owned),
            rate,
            faults: faults.to_vec(),
        });
    }

    /// Forwards every call again.
    pub fn clear_faults(&self) {
        lock(&self.shared.rules).clear();
    }

    /// Delays every call by `latency` before answering it (zero: no delay).
    pub fn set_latency(&self, latency: Duration) {
        *lock(&self.shared.latency) = latency;
    }

    /// Starts an outage of `length`: every open connection is reset now, and every connection
    /// accepted until it ends is reset at once.
    pub fn outage(&self, length: Duration) {
        *lock(&self.shared.outage_until) = Some(Instant::now() + length);
        let mut connections = lock(&self.shared.connections);
        lock(&self.shared.counts).killed_connections += self.shared.live.load(Ordering::Relaxed);
        connections.cancel();
        *connections = CancellationToken::new();
    }

    /// Whether an outage is under way.
    pub fn in_outage(&self) -> bool {
        self.shared.in_outage()
    }

    /// What the proxy did so far.
    pub fn counts(&self) -> Counts {
        lock(&self.shared.counts).clone()
    }

    /// The `ReceiveRequestAttemptId` of every `ReceiveMessage` request so far, faulted or
    /// forwarded, in arrival order.
    pub fn attempt_ids(&self) -> Vec<Option<String>> {
        lock(&self.shared.attempt_ids).clone()
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors or the like: try again shortly.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        // Closing the socket sends a reset rather than a clean end: a dropped connection looks
        // like a network failure, and the client cannot mistake it for a finished answer.
        let _ = stream.set_zero_linger();
        if shared.in_outage() {
            lock(&shared.counts).refused_connections += 1;
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        lock(&shared.counts).connections += 1;
        let token = lock(&shared.connections).child_token();
        tokio::spawn(serve(stream, Arc::clone(&shared), token));
    }
}

/// Serves one connection until the client closes it, or its token resets it.
async fn serve(stream: TcpStream, shared: Arc<Shared>, token: CancellationToken) {
    let service = {
        let shared = Arc::clone(&shared);
        let token = token.clone();
        service_fn(move |request| handle(Arc::clone(&shared), token.clone(), request))
    };
    let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    shared.live.fetch_add(1, Ordering::Relaxed);
    tokio::select! {
        _ = connection => {}
        () = token.cancelled() => {
            // Dropping the connection drops the socket: with zero linger, a reset.
        }
    }
    shared.live.fetch_sub(1, Ordering::Relaxed);
}

/// Resets the connection `token` stands for; never answers.
async fn reset(token: &CancellationToken) -> Result<Response<Full<Bytes>>, Infallible> {
    token.cancel();
    std::future::pending().await
}

async fn handle(
    shared: Arc<Shared>,
    token: CancellationToken,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let action = request
        .headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .map(|target| target.rsplit('.').next().unwrap_or(target).to_owned())
        .unwrap_or_else(|| "Unknown".to_owned());
    let (parts, body) = request.into_parts();
    // Read the whole request first, whatever happens to it: an answer to a half-read request
    // would leave the connection unusable, a failure the proxy did not mean to inject.
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return reset(&token).await;
    };
    if action == "ReceiveMessage" {
        let attempt = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|request| {
                request["ReceiveRequestAttemptId"]
                    .as_str()
                    .map(str::to_owned)
            });
        lock(&shared.attempt_ids).push(attempt);
    }
    if shared.in_outage() {
        shared.count(&action, |c| c.refused += 1);
        return reset(&token).await;
    }
    let latency = *lock(&shared.latency);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(fault) = shared.fault_for(&action) {
        shared.count(&action, |c| *c.injected.entry(fault).or_default() += 1);
        if fault == Fault::Silence {
            return std::future::pending().await;
        }
        let Some((status, query_error, body)) = fault.answer() else {
            return reset(&token).await;
        };
        let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-amz-json-1.0"),
        );
        headers.insert(
            HeaderName::from_static("x-amzn-requestid"),
            HeaderValue::from_static("00000000-0000-0000-0000-000000000000"),
        );
        if let Some(query_error) = query_error {
            headers.insert(
                HeaderName::from_static("x-amzn-query-error"),
                HeaderValue::from_static(query_error),
            );
        }
        return Ok(response);
    }

    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut uri = Uri::builder().path_and_query(path);
    if let Some(scheme) = shared.upstream.scheme() {
        uri = uri.scheme(scheme.clone());
    }
    if let Some(authority) = shared.upstream.authority() {
        uri = uri.authority(authority.clone());
    }
    let mut forward = Request::new(Full::new(body));
    *forward.method_mut() = parts.method;
    *forward.uri_mut() = uri.build().expect("a valid upstream URI");
    *forward.headers_mut() = end_to_end(parts.headers);
    match shared.client.request(forward).await {
        Ok(answer) => {
            let (parts, body) = answer.into_parts();
            let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
                shared.count(&action, |c| c.upstream_failed += 1);
                return Ok(bad_gateway());
            };
            shared.count(&action, |c| c.forwarded += 1);
            let mut response = Response::new(Full::new(body));
            *response.status_mut() = parts.status;
            *response.headers_mut() = end_to_end(parts.headers);
            Ok(response)
        }
        Err(_) => {
            shared.count(&action, |c| c.upstream_failed += 1);
            Ok(bad_gateway())
        }
    }
}

fn bad_gateway() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"upstream failed")));
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    response
}

/// The headers without the hop-by-hop ones; the body's length is set anew from the body.
fn end_to_end(mut headers: HeaderMap) -> HeaderMap {
    for name in [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::CONTENT_LENGTH,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
    ] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers
}
