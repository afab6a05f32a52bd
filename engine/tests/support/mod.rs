//! Shared support for the integration tests. They run against LocalStack (a real SQS
//! implementation) at `SQS_ENGINE_TEST_ENDPOINT`, else `AWS_ENDPOINT_URL`, else
//! `http://127.0.0.1:4566`. Without it they fail: `scripts/test.sh` starts it.

#![allow(dead_code, unreachable_pub, missing_docs)]

pub mod proxy;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{QueueAttributeName, SendMessageBatchRequestEntry};
use sqs_engine::{
    AwsSqs, BoxFuture, CallError, EngineBuilder, EntryResult, ReceiveRequest, ReceivedMessage,
    SqsApi, SqsDecorator, Stats,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub fn endpoint() -> String {
    std::env::var("SQS_ENGINE_TEST_ENDPOINT")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .unwrap_or_else(|_| "http://127.0.0.1:4566".to_owned())
}

pub async fn sdk_config() -> SdkConfig {
    sdk_config_at(&endpoint()).await
}

/// The SDK configuration of the tests, talking to `endpoint` (a [`proxy::Proxy`]'s URL, say).
pub async fn sdk_config_at(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "tests"))
        .load()
        .await
}

pub async fn client() -> Client {
    Client::new(&sdk_config().await)
}

/// A queue name no other test uses.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates a standard queue with the given visibility timeout; returns its URL.
pub async fn create_queue(client: &Client, name: &str, visibility_secs: u32) -> String {
    create(client, name, visibility_secs, false).await
}

/// Creates a FIFO queue (`name` ends in `.fifo`) with the given visibility timeout; returns its
/// URL.
pub async fn create_fifo_queue(client: &Client, name: &str, visibility_secs: u32) -> String {
    assert!(name.ends_with(".fifo"), "a FIFO queue's name ends in .fifo");
    create(client, name, visibility_secs, true).await
}

async fn create(client: &Client, name: &str, visibility_secs: u32, fifo: bool) -> String {
    let mut call = client.create_queue().queue_name(name).attributes(
        QueueAttributeName::VisibilityTimeout,
        visibility_secs.to_string(),
    );
    if fifo {
        call = call.attributes(QueueAttributeName::FifoQueue, "true");
    }
    call.send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "CreateQueue {name} failed (is LocalStack running at {}?): {e:?}",
                endpoint()
            )
        })
        .queue_url
        .expect("a queue URL")
}

/// Sends `(group, body)` pairs to a FIFO queue in order, ten per `SendMessageBatch`, each with
/// its body as its deduplication id.
pub async fn send_grouped(client: &Client, url: &str, messages: &[(String, String)]) {
    send_each(client, url, messages, |entry, (group, body)| {
        entry
            .message_body(body)
            .message_group_id(group)
            .message_deduplication_id(body)
    })
    .await;
}

/// Sends the bodies, ten per `SendMessageBatch`, and checks every entry landed.
pub async fn send(client: &Client, url: &str, bodies: &[String]) {
    send_each(client, url, bodies, |entry, body| entry.message_body(body)).await;
}

/// Sends one entry per item, made by `entry`, ten per `SendMessageBatch`, in order, and checks
/// every entry landed.
async fn send_each<T>(
    client: &Client,
    url: &str,
    items: &[T],
    entry: impl Fn(
        aws_sdk_sqs::types::builders::SendMessageBatchRequestEntryBuilder,
        &T,
    ) -> aws_sdk_sqs::types::builders::SendMessageBatchRequestEntryBuilder,
) {
    for (chunk_index, chunk) in items.chunks(10).enumerate() {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, item)| {
                entry(
                    SendMessageBatchRequestEntry::builder().id(format!("{chunk_index}-{i}")),
                    item,
                )
                .build()
                .expect("valid entry")
            })
            .collect();
        let output = client
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("SendMessageBatch");
        assert!(output.failed.is_empty(), "send failed: {:?}", output.failed);
    }
}

/// Sends the bodies like [`send`], several batches at once; returns the message ids SQS
/// assigned, in the order of `bodies`.
pub async fn send_ids(client: &Client, url: &str, bodies: &[String]) -> Vec<String> {
    let mut calls = tokio::task::JoinSet::new();
    let chunks: Vec<(usize, Vec<String>)> = bodies
        .chunks(10)
        .map(<[String]>::to_vec)
        .enumerate()
        .collect();
    let mut ids = vec![String::new(); bodies.len()];
    for lane in chunks.chunks(chunks.len().div_ceil(8).max(1)) {
        let (client, url, lane) = (client.clone(), url.to_owned(), lane.to_vec());
        calls.spawn(async move {
            let mut sent = Vec::new();
            for (chunk_index, chunk) in lane {
                let entries = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, body)| {
                        SendMessageBatchRequestEntry::builder()
                            .id(i.to_string())
                            .message_body(body)
                            .build()
                            .expect("valid entry")
                    })
                    .collect();
                let output = client
                    .send_message_batch()
                    .queue_url(&url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .expect("SendMessageBatch");
                assert!(output.failed.is_empty(), "send failed: {:?}", output.failed);
                for entry in output.successful {
                    let i: usize = entry.id.parse().expect("an entry id of ours");
                    sent.push((chunk_index * 10 + i, entry.message_id));
                }
            }
            sent
        });
    }
    while let Some(sent) = calls.join_next().await {
        for (position, id) in sent.expect("a send task does not panic") {
            ids[position] = id;
        }
    }
    assert!(
        ids.iter().all(|id| !id.is_empty()),
        "every message was sent"
    );
    ids
}

/// Visible and in-flight message counts.
pub async fn counts(client: &Client, url: &str) -> (u64, u64) {
    let output = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .expect("GetQueueAttributes");
    let attributes = output.attributes.unwrap_or_default();
    let read = |name: &QueueAttributeName| {
        attributes
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (
        read(&QueueAttributeName::ApproximateNumberOfMessages),
        read(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
    )
}

/// Receives directly (not through the engine) with the given wait and visibility.
pub async fn receive_raw(
    client: &Client,
    url: &str,
    wait_secs: i32,
    visibility_secs: i32,
) -> Vec<aws_sdk_sqs::types::Message> {
    client
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(wait_secs)
        .visibility_timeout(visibility_secs)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .send()
        .await
        .expect("ReceiveMessage")
        .messages
        .unwrap_or_default()
}

/// An engine builder on LocalStack for `queue`, with a short long-poll so tests stop quickly.
pub async fn builder(queue: &str) -> EngineBuilder {
    sqs_engine::Engine::builder()
        .sdk_config(&sdk_config().await)
        .queue(queue)
        .wait_time(Duration::from_secs(1))
}

/// An engine run in the background, stopped by `stop`.
pub struct Running {
    pub stop: CancellationToken,
    pub task: JoinHandle<Result<Stats, sqs_engine::Error>>,
}

impl Running {
    pub async fn shutdown(self) -> Stats {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("the engine stops within 60 s")
            .expect("the engine task does not panic")
            .expect("the engine runs without error")
    }
}

pub fn spawn_engine<H: sqs_engine::Handler>(engine: sqs_engine::Engine, handler: H) -> Running {
    let stop = CancellationToken::new();
    let shutdown = stop.clone().cancelled_owned();
    let task = tokio::spawn(engine.run(handler, shutdown));
    Running { stop, task }
}

pub fn spawn_batch_engine<H: sqs_engine::BatchHandler>(
    engine: sqs_engine::Engine,
    handler: H,
) -> Running {
    let stop = CancellationToken::new();
    let shutdown = stop.clone().cancelled_owned();
    let task = tokio::spawn(engine.run_batches(handler, shutdown));
    Running { stop, task }
}

/// Waits until `check` holds, polling every 20 ms, for at most `limit`.
pub async fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A batch call the engine made, as LocalStack answered it.
#[derive(Debug, Clone)]
pub struct BatchCall {
    pub action: &'static str,
    pub receipt_handles: Vec<String>,
    pub result: Result<Vec<EntryResult>, CallError>,
}

/// What the engine sent and got, through [`Recording`].
#[derive(Debug, Default)]
pub struct Record {
    pub batches: Vec<BatchCall>,
    /// Receipt handle to message id, for every message received.
    pub received: HashMap<String, String>,
}

/// Forwards every call to LocalStack and records the batch calls and their answers. With
/// `corrupt_body` set, a received message with that body gets an invalid receipt handle, so
/// that LocalStack refuses its entry.
#[derive(Clone)]
pub struct Recording {
    inner: AwsSqs,
    pub record: Arc<Mutex<Record>>,
    corrupt_body: Option<String>,
}

pub const INVALID_RECEIPT: &str = "not-a-valid-receipt-handle";

impl Recording {
    pub async fn new(corrupt_body: Option<&str>) -> Self {
        Self {
            inner: AwsSqs::from_sdk_config(&sdk_config().await),
            record: Arc::default(),
            corrupt_body: corrupt_body.map(str::to_owned),
        }
    }

    pub fn batches(&self) -> Vec<BatchCall> {
        self.record.lock().expect("lock").batches.clone()
    }

    fn log(
        &self,
        action: &'static str,
        handles: Vec<String>,
        result: &Result<Vec<EntryResult>, CallError>,
    ) {
        self.record.lock().expect("lock").batches.push(BatchCall {
            action,
            receipt_handles: handles,
            result: result.clone(),
        });
    }
}

impl SqsDecorator for Recording {
    type Inner = AwsSqs;

    fn inner(&self) -> &AwsSqs {
        &self.inner
    }

    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        Box::pin(async move {
            let mut messages = self.inner.receive(request).await?;
            let mut record = self.record.lock().expect("lock");
            for message in &mut messages {
                if self.corrupt_body.as_deref() == Some(message.body.as_str()) {
                    message.receipt_handle = INVALID_RECEIPT.to_owned();
                }
                record
                    .received
                    .insert(message.receipt_handle.clone(), message.message_id.clone());
            }
            Ok(messages)
        })
    }

    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        Box::pin(async move {
            let result = self
                .inner
                .delete_message_batch(queue_url, receipt_handles)
                .await;
            let handles = receipt_handles.iter().map(|h| (*h).to_owned()).collect();
            self.log("DeleteMessageBatch", handles, &result);
            result
        })
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        Box::pin(async move {
            let result = self
                .inner
                .change_message_visibility_batch(queue_url, entries)
                .await;
            let handles = entries.iter().map(|(h, _)| (*h).to_owned()).collect();
            self.log("ChangeMessageVisibilityBatch", handles, &result);
            result
        })
    }

    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [sqs_engine::SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        Box::pin(async move {
            let result = self.inner.send_message_batch(queue_url, entries).await;
            let bodies = entries.iter().map(|entry| entry.body.clone()).collect();
            self.log("SendMessageBatch", bodies, &result);
            result
        })
    }
}

/// Calls of `action` in a stretch of LocalStack's log (every client's calls, all queues).
pub fn logged_calls(log: &str, action: &str) -> usize {
    let needle = format!("AWS sqs.{action} =>");
    log.lines().filter(|line| line.contains(&needle)).count()
}

/// Where LocalStack writes its log: `SQS_ENGINE_LOCALSTACK_LOG`, else where
/// `scripts/localstack.sh` puts it.
pub fn localstack_log_path() -> std::path::PathBuf {
    if let Ok(path) = std::env::var("SQS_ENGINE_LOCALSTACK_LOG") {
        return path.into();
    }
    let cache = std::env::var("SQS_ENGINE_CACHE").map_or_else(
        |_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/sqs-engine")
        },
        std::path::PathBuf::from,
    );
    let port = std::env::var("LOCALSTACK_PORT").unwrap_or_else(|_| "4566".to_owned());
    cache.join(format!("localstack-{port}.log"))
}

/// LocalStack's log so far.
pub fn read_log() -> String {
    let path = localstack_log_path();
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "LocalStack's log at {} is needed to check the engine's call counts ({e}); \
             start LocalStack with scripts/localstack.sh",
            path.display()
        )
    })
}
