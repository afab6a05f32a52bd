//! SQS on LocalStack, called directly with `aws-sdk-sqs`: queues, sending, counts.

use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context as _, ensure};
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{QueueAttributeName, SendMessageBatchRequestEntry};

/// LocalStack's default address.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:4566";

/// The endpoint the tests use: `SQS_ENGINE_TEST_ENDPOINT`, else [`DEFAULT_ENDPOINT`].
pub fn endpoint() -> String {
    std::env::var("SQS_ENGINE_TEST_ENDPOINT").unwrap_or_else(|_| DEFAULT_ENDPOINT.to_owned())
}

/// An SDK configuration for LocalStack at `endpoint`: credentials test/test, us-east-1.
pub async fn sdk_config(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "reliability"))
        .load()
        .await
}

/// A client for LocalStack at `endpoint`.
pub async fn client(endpoint: &str) -> Client {
    Client::new(&sdk_config(endpoint).await)
}

/// A queue name no other run uses: `prefix`, the process id, a counter and the clock.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{}-{millis}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates a standard queue with the given visibility timeout and returns its URL.
///
/// # Errors
///
/// When `CreateQueue` fails, naming the endpoint (LocalStack not running, most likely).
pub async fn create_queue(
    client: &Client,
    name: &str,
    visibility_secs: u32,
) -> anyhow::Result<String> {
    let output = client
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::VisibilityTimeout, visibility_secs.to_string())
        .send()
        .await
        .with_context(|| {
            format!(
                "CreateQueue {name} failed: is LocalStack running at {}? (scripts/localstack.sh start)",
                endpoint()
            )
        })?;
    output
        .queue_url
        .context("CreateQueue answered without a URL")
}

/// Deletes the queue; errors are ignored (it is clean-up).
pub async fn delete_queue(client: &Client, url: &str) {
    let _ = client.delete_queue().queue_url(url).send().await;
}

/// Sends `bodies` with `SendMessageBatch`, ten per call, `concurrency` calls in flight, and
/// returns the message ids SQS assigned, in the order of `bodies`.
///
/// # Errors
///
/// When a call or an entry fails.
pub async fn send_all(
    client: &Client,
    url: &str,
    bodies: &[String],
    concurrency: usize,
) -> anyhow::Result<Vec<String>> {
    let chunks: Vec<(usize, Vec<String>)> = bodies
        .chunks(10)
        .map(<[String]>::to_vec)
        .enumerate()
        .collect();
    let lanes = concurrency.max(1);
    let per_lane = chunks.len().div_ceil(lanes).max(1);
    let mut calls = tokio::task::JoinSet::new();
    for lane in chunks.chunks(per_lane) {
        let (client, url, lane) = (client.clone(), url.to_owned(), lane.to_vec());
        calls.spawn(async move {
            let mut sent = Vec::with_capacity(lane.len() * 10);
            for (chunk_index, chunk) in lane {
                let output = send_batch(&client, &url, &chunk).await?;
                for (i, id) in output {
                    sent.push((chunk_index * 10 + i, id));
                }
            }
            anyhow::Ok(sent)
        });
    }
    let mut ids = vec![String::new(); bodies.len()];
    while let Some(sent) = calls.join_next().await {
        for (position, id) in sent.context("a send task panicked")?? {
            ids[position] = id;
        }
    }
    ensure!(
        ids.iter().all(|id| !id.is_empty()),
        "some messages were not sent"
    );
    Ok(ids)
}

/// Sends up to ten bodies in one `SendMessageBatch`; returns (position in `bodies`, message
/// id) for each.
///
/// # Errors
///
/// When the call fails or any entry fails.
pub async fn send_batch(
    client: &Client,
    url: &str,
    bodies: &[String],
) -> anyhow::Result<Vec<(usize, String)>> {
    let entries = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| {
            SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(body)
                .build()
                .context("a SendMessageBatch entry")
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let output = client
        .send_message_batch()
        .queue_url(url)
        .set_entries(Some(entries))
        .send()
        .await
        .context("SendMessageBatch")?;
    ensure!(
        output.failed.is_empty(),
        "SendMessageBatch entries failed: {:?}",
        output.failed
    );
    output
        .successful
        .into_iter()
        .map(|entry| {
            Ok((
                entry.id.parse().context("an entry id of ours")?,
                entry.message_id,
            ))
        })
        .collect()
}

/// The queue's `ApproximateNumberOfMessages` (visible) and
/// `ApproximateNumberOfMessagesNotVisible` (in flight).
///
/// # Errors
///
/// When `GetQueueAttributes` fails.
pub async fn counts(client: &Client, url: &str) -> anyhow::Result<(u64, u64)> {
    let output = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .context("GetQueueAttributes")?;
    let attributes = output.attributes.unwrap_or_default();
    let read = |name: &QueueAttributeName| {
        attributes
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Ok((
        read(&QueueAttributeName::ApproximateNumberOfMessages),
        read(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
    ))
}
