//! SQS on LocalStack, called directly with `aws-sdk-sqs`: queues, sending, counts, receiving.

use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context as _, ensure};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::builders::SendMessageBatchRequestEntryBuilder;
use aws_sdk_sqs::types::{
    Message, MessageSystemAttributeName, QueueAttributeName, SendMessageBatchRequestEntry,
};

use sqs_engine::testing::queue_depth;

use crate::localstack::endpoint;

/// A queue name no other test or run uses: `prefix`, the process id, a counter and the clock.
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
///
/// # Panics
///
/// When `CreateQueue` fails, naming the endpoint (LocalStack not running, most likely).
pub async fn create_queue(client: &Client, name: &str, visibility_secs: u32) -> String {
    create(client, name, visibility_secs, false).await
}

/// The URL of the queue named `name`, which must exist.
///
/// # Panics
///
/// When `GetQueueUrl` fails: the queue does not exist, or the endpoint does not answer.
pub async fn queue_url(client: &Client, name: &str) -> String {
    client
        .get_queue_url()
        .queue_name(name)
        .send()
        .await
        .unwrap_or_else(|error| panic!("the queue {name} exists: {error:?}"))
        .queue_url
        .unwrap_or_else(|| panic!("GetQueueUrl answers a URL for {name}"))
}

/// Creates a FIFO queue (`name` ends in `.fifo`) with the given visibility timeout; returns its
/// URL.
///
/// # Panics
///
/// When `name` does not end in `.fifo`, or `CreateQueue` fails.
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
                "CreateQueue {name} failed (is LocalStack running at {}? \
                 scripts/localstack.sh start): {e:?}",
                endpoint()
            )
        })
        .queue_url
        .expect("a queue URL")
}

/// Deletes the queue; errors are ignored (it is clean-up).
pub async fn delete_queue(client: &Client, url: &str) {
    let _ = client.delete_queue().queue_url(url).send().await;
}

/// Sends the bodies, ten per `SendMessageBatch`, in order.
///
/// # Panics
///
/// When a call or an entry fails.
pub async fn send(client: &Client, url: &str, bodies: &[String]) {
    send_each(client, url, bodies, |entry, body| entry.message_body(body)).await;
}

/// Sends `(group, body)` pairs to a FIFO queue in order, ten per `SendMessageBatch`, each with
/// its body as its deduplication id.
///
/// # Panics
///
/// When a call or an entry fails.
pub async fn send_grouped(client: &Client, url: &str, messages: &[(String, String)]) {
    send_each(client, url, messages, |entry, (group, body)| {
        entry
            .message_body(body)
            .message_group_id(group)
            .message_deduplication_id(body)
    })
    .await;
}

/// Sends one entry per item, made by `entry`, ten per `SendMessageBatch`, in order.
async fn send_each<T>(
    client: &Client,
    url: &str,
    items: &[T],
    entry: impl Fn(SendMessageBatchRequestEntryBuilder, &T) -> SendMessageBatchRequestEntryBuilder,
) {
    for chunk in items.chunks(10) {
        let entries = chunk
            .iter()
            .map(|item| entry(SendMessageBatchRequestEntry::builder(), item))
            .collect();
        send_entries(client, url, entries)
            .await
            .expect("SendMessageBatch");
    }
}

/// Sends the bodies, ten per `SendMessageBatch`, `lanes` calls in flight; returns the message
/// ids SQS assigned, in the order of `bodies`.
///
/// # Panics
///
/// When a call or an entry fails.
pub async fn send_ids(client: &Client, url: &str, bodies: &[String], lanes: usize) -> Vec<String> {
    let chunks: Vec<(usize, Vec<String>)> = bodies
        .chunks(10)
        .map(<[String]>::to_vec)
        .enumerate()
        .collect();
    let per_lane = chunks.len().div_ceil(lanes.max(1)).max(1);
    let mut calls = tokio::task::JoinSet::new();
    for lane in chunks.chunks(per_lane) {
        let (client, url, lane) = (client.clone(), url.to_owned(), lane.to_vec());
        calls.spawn(async move {
            let mut sent = Vec::with_capacity(lane.len() * 10);
            for (chunk_index, chunk) in lane {
                let output = send_batch(&client, &url, &chunk)
                    .await
                    .expect("SendMessageBatch");
                for (i, id) in output {
                    sent.push((chunk_index * 10 + i, id));
                }
            }
            sent
        });
    }
    let mut ids = vec![String::new(); bodies.len()];
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
        .map(|body| SendMessageBatchRequestEntry::builder().message_body(body))
        .collect();
    send_entries(client, url, entries).await
}

/// Sends up to ten entries in one `SendMessageBatch`, each with its position as its id;
/// returns (position, message id) for each.
async fn send_entries(
    client: &Client,
    url: &str,
    entries: Vec<SendMessageBatchRequestEntryBuilder>,
) -> anyhow::Result<Vec<(usize, String)>> {
    let entries = entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            entry
                .id(i.to_string())
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
/// # Panics
///
/// When `GetQueueAttributes` fails.
pub async fn counts(client: &Client, url: &str) -> (u64, u64) {
    let depth = queue_depth(client, url).await.expect("GetQueueAttributes");
    (depth.visible, depth.in_flight)
}

/// Receives up to ten messages directly (not through the engine) with the given wait and
/// visibility, with every system attribute.
///
/// # Panics
///
/// When `ReceiveMessage` fails.
pub async fn receive_raw(
    client: &Client,
    url: &str,
    wait_secs: i32,
    visibility_secs: i32,
) -> Vec<Message> {
    client
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(wait_secs)
        .visibility_timeout(visibility_secs)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .expect("ReceiveMessage")
        .messages
        .unwrap_or_default()
}
