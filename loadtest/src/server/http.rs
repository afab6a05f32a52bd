//! HTTP: the accept loop, and the one request handler that turns `POST /` into an action and
//! its answer into a response: with an `X-Amz-Target` header, an SQS action of [`Sqs`] (the
//! AWS JSON 1.0 protocol); without one and with a form-encoded body, an SNS action of [`Sns`]
//! (the AWS Query protocol, its `Action` field naming the action).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::actions::{Action, Sqs};
use super::named::Named;
use super::protocol::{CONTENT_TYPE as AMZ_JSON, ErrorKind, SqsError, TARGET_PREFIX};
use super::query::{FORM_CONTENT_TYPE, Form, QueryError, XML_CONTENT_TYPE};
use super::sns::Sns;

/// The largest request body read, in bytes: a full `SendMessageBatch` with room to spare.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How long a shutdown waits for open connections to finish their requests.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The pause after a failed accept (out of file descriptors, say) before the next.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Tokio's timer fires on whole milliseconds, after the deadline: half a millisecond earlier
/// centres the waits on the latencies drawn rather than always above them.
fn early(deadline: Instant) -> Instant {
    deadline
        .checked_sub(Duration::from_micros(500))
        .unwrap_or(deadline)
}

/// Accepts connections on `listener` and serves them, HTTP/1.1 with keep-alive, until
/// `stop` is cancelled; then stops accepting and waits (a while) for open connections to
/// finish the requests in progress. Long polls answer at once when `stop` is cancelled.
pub(crate) async fn serve(
    listener: TcpListener,
    sqs: Arc<Sqs>,
    sns: Arc<Sns>,
    stop: CancellationToken,
) {
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder.keep_alive(true);
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(error) => {
                    warn!(%error, "accepting a connection failed");
                    sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
        };
        // Answers are small and written at once: Nagle's delay would only add latency.
        if let Err(error) = stream.set_nodelay(true) {
            debug!(%error, "setting TCP_NODELAY failed");
        }
        let sqs = Arc::clone(&sqs);
        let sns = Arc::clone(&sns);
        let service =
            service_fn(move |request| handle(Arc::clone(&sqs), Arc::clone(&sns), request));
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = sleep(SHUTDOWN_GRACE) => {
            warn!("connections still open {} s after shutdown began; leaving them", SHUTDOWN_GRACE.as_secs());
        }
    }
}

/// What an action answered: SQS's JSON or error, or SNS's XML or error.
enum Answered {
    /// An SQS action's answer.
    Sqs(Result<Vec<u8>, SqsError>),
    /// An SNS action's answer.
    Sns(Result<Vec<u8>, QueryError>),
}

/// Answers one request, after the latency drawn for it (see [`super::latency`]): half before
/// the action, the rest after its answer is ready.
async fn handle(
    sqs: Arc<Sqs>,
    sns: Arc<Sns>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let arrived = Instant::now();
    let latency = sqs.delays.draw();
    let inbound = latency / 2;
    if !inbound.is_zero() {
        sleep_until(early(arrived + inbound)).await;
    }
    let acting = Instant::now();
    let request_id = sqs.next_request_id();
    let answered = if is_query(&request) {
        Answered::Sns(answer_query(&sns, request, request_id).await)
    } else {
        Answered::Sqs(answer(Arc::clone(&sqs), request).await)
    };
    if !latency.is_zero() {
        // One deadline for the whole call, so that the inbound wait's rounding is not paid
        // twice: the latency, plus however long the action took (a long poll's wait).
        sleep_until(early(arrived + latency + acting.elapsed())).await;
    }
    let (status, body, content_type, query_error) = match answered {
        Answered::Sqs(Ok(body)) => (StatusCode::OK, body, AMZ_JSON, None),
        Answered::Sqs(Err(error)) => {
            debug!(%error, "answering with an error");
            let header = error.query_error_header();
            (
                StatusCode::BAD_REQUEST,
                error.body(),
                AMZ_JSON,
                Some(header),
            )
        }
        Answered::Sns(Ok(body)) => (StatusCode::OK, body, XML_CONTENT_TYPE, None),
        Answered::Sns(Err(error)) => {
            debug!(%error, "answering with an SNS error");
            (error.status, error.body(request_id), XML_CONTENT_TYPE, None)
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert("x-amzn-requestid", HeaderValue::from(request_id));
    if let Some(value) = query_error.and_then(|v| HeaderValue::from_str(&v).ok()) {
        headers.insert("x-amzn-query-error", value);
    }
    Ok(response)
}

/// Whether `request` is in the AWS Query protocol: a `POST` with no `X-Amz-Target` and a
/// form-encoded body.
fn is_query(request: &Request<Incoming>) -> bool {
    request.method() == Method::POST
        && !request.headers().contains_key("x-amz-target")
        && request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with(FORM_CONTENT_TYPE))
}

/// The XML answer to an SNS `request`, or the error to answer with.
async fn answer_query(
    sns: &Sns,
    request: Request<Incoming>,
    request_id: u64,
) -> Result<Vec<u8>, QueryError> {
    let body = Limited::new(request.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|error| {
            QueryError::invalid_parameter(format!(
                "reading the request body failed (at most {MAX_BODY_BYTES} bytes): {error}"
            ))
        })?
        .to_bytes();
    sns.call(&Form::parse(&body), request_id)
}

/// The JSON answer to `request`, or the error to answer with. On an overloaded server (see
/// [`super::overload`]) the call waits for its turn on a task of its own, which applies it even
/// when the client gives up on it.
async fn answer(sqs: Arc<Sqs>, request: Request<Incoming>) -> Result<Vec<u8>, SqsError> {
    let unknown = || {
        SqsError::new(
            ErrorKind::UnknownOperation,
            "the embedded SQS server answers `POST /` with an `X-Amz-Target: AmazonSQS.<Action>` \
             header (the AWS JSON 1.0 protocol) only",
        )
    };
    if request.method() != Method::POST {
        return Err(unknown());
    }
    let target = request
        .headers()
        .get("x-amz-target")
        .and_then(|value| value.to_str().ok())
        .ok_or_else(unknown)?;
    let name = target.strip_prefix(TARGET_PREFIX).ok_or_else(unknown)?;
    let action = Action::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
        SqsError::new(
            ErrorKind::UnsupportedOperation,
            format!(
                "the embedded SQS server does not implement {name}; it implements {}",
                known.join(", ")
            ),
        )
    })?;
    let body = Limited::new(request.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|error| {
            SqsError::new(
                ErrorKind::Serialization,
                format!(
                    "reading the request body failed (at most {MAX_BODY_BYTES} bytes): {error}"
                ),
            )
        })?
        .to_bytes();
    if sqs.overload.overload().is_none() {
        return sqs.call(action, &body).await;
    }
    let call = tokio::spawn(async move {
        drop(sqs.overload.turn(|| sqs.messages_held()).await);
        sqs.call(action, &body).await
    });
    match call.await {
        Ok(answer) => answer,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // Cancelled: the server's runtime is going away, and this request with it.
        Err(_) => std::future::pending().await,
    }
}
