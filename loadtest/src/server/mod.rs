//! An embedded, in-memory SQS server: a benchmark target for the load test.
//!
//! It speaks the AWS JSON 1.0 protocol that `aws-sdk-sqs` uses (`POST /` with
//! `X-Amz-Target: AmazonSQS.<Action>`) over HTTP/1.1 with keep-alive, keeps its queues in
//! memory, and is fast enough that a load test against it measures the engine, not the
//! server. **It is not evidence of correctness**: it implements the parts of SQS the engine
//! and the load test use, as the SDK's serializers describe them, and nothing proves it
//! behaves like SQS beyond its own tests. Correctness is proven against LocalStack (and
//! AWS).
//!
//! What it implements: `CreateQueue`, `GetQueueUrl`, `GetQueueAttributes`,
//! `SetQueueAttributes`, `ListQueues`, `PurgeQueue`, `DeleteQueue`, `SendMessage`,
//! `SendMessageBatch`, `ReceiveMessage` (with long polling), `DeleteMessage`,
//! `DeleteMessageBatch`, `ChangeMessageVisibility` and `ChangeMessageVisibilityBatch`, with
//! visibility timeouts (none past 12 hours from the receive), delays, receive counts and
//! message attributes, and FIFO queues' groups, ordering and deduplication. Any other action
//! is answered with `AWS.SimpleQueueService.UnsupportedOperation`. Its messages are kept in
//! the engine's SQS model (`sqs_engine::testing::model`), as the engine's in-process SQS
//! keeps them, so the two hand out messages in the same order.
//!
//! A queue's `RedrivePolicy` applies as on SQS: a receive that comes upon a message already
//! received `maxReceiveCount` times moves it, visible, to the dead-letter queue, which must
//! exist and be of the queue's kind (the rules are the model's, `RedrivePolicy`).
//!
//! What it does not: message retention, tags, permissions, signature checks (any credentials
//! are accepted), and persistence. A receipt handle that
//! is not the latest of its message (the message was received again since, or deleted) gets
//! the answer SQS documents for a delete (success, nothing deleted), as in the engine's
//! in-process SQS; a visibility change with it is refused with `ReceiptHandleIsInvalid`.
//!
//! SNS: beside SQS, on the same endpoint, a minimal SNS in the AWS Query protocol that
//! `aws-sdk-sns` speaks (a form-encoded `POST /` naming its `Action`, XML answers): topics,
//! subscriptions of the server's own queues (raw delivery or the JSON envelope), `Publish` and
//! `PublishBatch`, delivered at once into the subscribed queues. What it covers and what not is
//! in `sns`. Its calls are counted with SQS's, by action name ([`SNS_ACTIONS`] tells which are
//! SNS's).
//!
//! Latency: by default it answers at once (loopback latency, a fraction of a millisecond a
//! call). [`EmbeddedSqs::set_latency`] makes it hold every call for a fixed or drawn
//! latency ([`Latency`], with an SQS-like distribution), so that a load test can run at the
//! round trips SQS in a region has, without blocking the server: other calls proceed while
//! one waits.
//!
//! Overload: [`EmbeddedSqs::set_overload`] makes it serve a fixed number of calls at once, each
//! costing time per message it holds, and apply calls whose client gave up ([`Overload`]), so
//! that a load test can show what the engine does to an SQS that cannot keep up.
//!
//! Layout: `protocol` has the wire shapes and errors, `queue` one queue's state,
//! `actions` what each action does, `latency` the latency added to each call, `overload` the
//! slots and costs of an overloaded server, and `http`
//! the HTTP server; for SNS, `query` the AWS Query protocol, `sns` the topics and their
//! actions, and `envelope` the JSON notification of a delivery without raw delivery; `named`
//! finds an action of either API by its name and gives its counter's index.

mod actions;
mod envelope;
mod http;
mod latency;
mod named;
mod overload;
mod protocol;
mod query;
mod queue;
mod receipt;
#[cfg(test)]
mod redrive_tests;
mod sns;
#[cfg(test)]
mod sns_tests;
#[cfg(test)]
mod tests;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result, anyhow};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::error;

use actions::Sqs;
pub use latency::{DEFAULT_SEED, Latency};
pub use overload::Overload;
pub use queue::DeletedAges;

use sns::{Sns, SnsAction};

/// The names of the SNS actions the server answers, as [`EmbeddedSqs::call_counts`] names
/// them: every other name there is an SQS action.
pub const SNS_ACTIONS: [&str; SnsAction::ALL.len()] = {
    let mut names = [""; SnsAction::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = SnsAction::ALL[i].name();
        i += 1;
    }
    names
};

/// A running embedded SQS server. Dropping it stops the server without waiting;
/// [`EmbeddedSqs::shutdown`] stops it and waits.
///
/// The server runs on a thread of its own, in a single-threaded tokio runtime: it does not
/// compete with the engine's runtime for its worker threads when both are in one process,
/// and it costs less CPU per call than on a multi-threaded runtime (no cross-thread
/// wake-ups, allocations freed where they were made). What one thread serves is in
/// `docs/benchmarks.md` ("The load test's own settings").
#[derive(Debug)]
pub struct EmbeddedSqs {
    /// The endpoint URL to configure the SDK with, e.g. `http://127.0.0.1:40123`.
    endpoint: String,
    /// The queues and the actions on them.
    sqs: Arc<Sqs>,
    /// The topics and the actions on them.
    sns: Arc<Sns>,
    /// Cancelled to stop the server.
    stop: CancellationToken,
    /// The server's thread; `None` once joined.
    thread: Option<JoinHandle<()>>,
    /// Completes (with an error: its sender is dropped) when the server's runtime is gone.
    stopped: Option<oneshot::Receiver<()>>,
}

impl EmbeddedSqs {
    /// Starts a server listening on `addr` (port 0 picks a free port), on a thread of its
    /// own. Needs no tokio runtime.
    ///
    /// An unspecified address (`0.0.0.0`, `[::]`) listens on every interface, and the
    /// endpoint and queue URLs then name the loopback address.
    ///
    /// # Errors
    ///
    /// When the address cannot be bound, or the thread or its runtime cannot be made.
    pub fn start(addr: SocketAddr) -> Result<Self> {
        let listener = std::net::TcpListener::bind(addr)
            .with_context(|| format!("binding the embedded SQS server to {addr}"))?;
        listener
            .set_nonblocking(true)
            .context("making the embedded SQS server's socket non-blocking")?;
        let local = listener
            .local_addr()
            .context("reading the embedded SQS server's address")?;
        let host = match local.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let endpoint = format!("http://{}", SocketAddr::new(host, local.port()));
        let stop = CancellationToken::new();
        let sqs = Arc::new(Sqs::new(endpoint.clone(), stop.clone()));
        let sns = Arc::new(Sns::new(Arc::clone(&sqs)));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("building the embedded SQS server's runtime")?;
        let (stopped_tx, stopped_rx) = oneshot::channel::<()>();
        let thread = {
            let sqs = Arc::clone(&sqs);
            let sns = Arc::clone(&sns);
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("embedded-sqs".to_owned())
                .spawn(move || {
                    runtime.block_on(async move {
                        match TcpListener::from_std(listener) {
                            Ok(listener) => http::serve(listener, sqs, sns, stop).await,
                            Err(err) => error!(%err, "the embedded SQS server cannot listen"),
                        }
                    });
                    // Open connections end with the runtime, before `stopped` completes.
                    drop(runtime);
                    drop(stopped_tx);
                })
                .context("starting the embedded SQS server's thread")?
        };
        Ok(Self {
            endpoint,
            sqs,
            sns,
            stop,
            thread: Some(thread),
            stopped: Some(stopped_rx),
        })
    }

    /// The endpoint URL to configure the SDK with.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// How old the messages the queue at `queue_url` deleted were when their deletes were
    /// answered: from the `SendMessage` (or batch entry) that stored each to the moment the
    /// server applied its `DeleteMessage` or `DeleteMessageBatch` entry, just before it
    /// answered. `None` when the queue deleted none, or does not exist (any more).
    pub fn deleted_ages(&self, queue_url: &str) -> Option<DeletedAges> {
        self.sqs.deleted_ages(queue_url)
    }

    /// Sets the latency added to every call from now on (see [`Latency`]), and reseeds its
    /// draws with `seed`: the same seed draws the same latencies, in the order the calls
    /// arrive. Calls already waiting keep the latency they drew.
    pub fn set_latency(&self, latency: Latency, seed: u64) {
        self.sqs.delays.set(latency, seed);
    }

    /// Makes the server overloaded for calls arriving from now on (see [`Overload`]): a fixed
    /// number of SQS calls served at once, each costing time per message the server holds, and
    /// applied even when the client gave up on it. `None` serves every call at once again.
    pub fn set_overload(&self, overload: Option<Overload>) {
        self.sqs.overload.set(overload);
    }

    /// The latency added to every call now.
    pub fn latency(&self) -> Latency {
        self.sqs.delays.latency()
    }

    /// Calls answered so far, by action name (errors included), SQS's and SNS's (see
    /// [`SNS_ACTIONS`]); actions never called are left out.
    pub fn call_counts(&self) -> Vec<(&'static str, u64)> {
        let mut counts = self.sqs.call_counts();
        counts.extend(self.sns.call_counts());
        counts
    }

    /// Stops the server: no new connections are accepted, long polls answer at once, and
    /// open connections are given a few seconds to finish their requests; then its thread
    /// is joined.
    ///
    /// # Errors
    ///
    /// When the server's thread panicked.
    pub async fn shutdown(mut self) -> Result<()> {
        self.stop.cancel();
        if let Some(stopped) = self.stopped.take() {
            // Never sent: completes with an error when the sender is dropped.
            let _ = stopped.await;
        }
        if let Some(thread) = self.thread.take() {
            // The thread has nothing left to do but return.
            thread
                .join()
                .map_err(|_| anyhow!("the embedded SQS server's thread panicked"))?;
        }
        Ok(())
    }
}

impl Drop for EmbeddedSqs {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
