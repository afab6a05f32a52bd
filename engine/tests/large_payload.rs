//! Bodies too large for SQS through S3, against LocalStack's SQS and S3, with AWS's own Python
//! extended client (PyPI's `amazon-sqs-extended-client`, run by `scripts/extended-client.py`)
//! on the other side: it sends and sqs-engine receives, sqs-engine sends and it receives.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use aws_sdk_sqs::types::MessageAttributeValue;
use futures::future::join_all;
use ruststream::{Broker, ConnectedBroker, HeaderMap, OutgoingMessage};
use sqs_engine::prelude::*;
use sqs_engine::{LargePayloads, Message, Outcome};
use sqs_engine_test_support as support;

/// An S3 client on LocalStack: path-style, as a local endpoint has no bucket subdomains.
async fn s3() -> aws_sdk_s3::Client {
    let config = support::sdk_config().await;
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    )
}

/// A new bucket, by a unique name.
async fn bucket(s3: &aws_sdk_s3::Client) -> String {
    let name = support::unique("payloads").to_lowercase().replace('_', "-");
    s3.create_bucket()
        .bucket(&name)
        .send()
        .await
        .expect("CreateBucket");
    name
}

/// The keys of the objects in `bucket`.
async fn objects(s3: &aws_sdk_s3::Client, bucket: &str) -> Vec<String> {
    s3.list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .expect("ListObjectsV2")
        .contents
        .unwrap_or_default()
        .into_iter()
        .filter_map(|object| object.key)
        .collect()
}

/// A test's bucket and queue, and the clients to reach them.
struct Place {
    s3: aws_sdk_s3::Client,
    sqs: aws_sdk_sqs::Client,
    bucket: String,
    queue: String,
    url: String,
}

impl Place {
    /// A new bucket and a new queue named after `prefix`.
    async fn new(prefix: &str) -> Self {
        let s3 = s3().await;
        let sqs = support::client().await;
        let bucket = bucket(&s3).await;
        let queue = support::unique(prefix);
        let url = support::create_queue(&sqs, &queue, 30).await;
        Self {
            s3,
            sqs,
            bucket,
            queue,
            url,
        }
    }

    /// Has the Python extended client send a body of `len` bytes (a [`large_body`]) to the
    /// queue, which stores it in the bucket; returns the body.
    fn sent_by_the_extended_client(&self, len: usize) -> String {
        let body = large_body(len);
        let file = body_file(&self.queue);
        std::fs::write(&file, &body).expect("write the body");
        extended_client("send", &self.url, &self.bucket, &file);
        body
    }
}

/// A text of `len` bytes that differs along its length, so that a truncated or reordered copy
/// does not compare equal.
fn large_body(len: usize) -> String {
    let mut body: String = (0..len.div_ceil(8)).map(|n| format!("{n:07} ")).collect();
    body.truncate(len);
    body
}

/// Runs the Python extended client's `command` (`send` or `receive`) on `queue_url` and
/// `bucket`, with `file` the body to send or where to write the body received.
///
/// # Panics
///
/// When its venv cannot be made or the command fails.
fn extended_client(command: &str, queue_url: &str, bucket: &str, file: &Path) {
    let scripts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts");
    let python = Command::new(scripts.join("extended-client.sh"))
        .arg("python")
        .output()
        .expect("run scripts/extended-client.sh");
    assert!(
        python.status.success(),
        "scripts/extended-client.sh python failed: {}",
        String::from_utf8_lossy(&python.stderr)
    );
    let python = String::from_utf8(python.stdout).expect("a path");
    let status = Command::new(python.trim())
        .arg(scripts.join("extended-client.py"))
        .args([command, queue_url, bucket])
        .arg(file)
        .env("AWS_ENDPOINT_URL", support::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .status()
        .expect("run the extended client");
    assert!(status.success(), "extended-client.py {command} failed");
}

/// A file of its own for one test's body.
fn body_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{}.txt", support::unique(name)))
}

/// What the handler saw: each body with its message attributes' names.
type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// Runs an engine with `payloads` on `queue` until the handler saw `expected` messages (or
/// none for 5 s when `expected` is 0), and returns what it saw.
async fn receive_with(queue: &str, payloads: LargePayloads, expected: usize) -> Seen {
    let seen: Seen = Arc::default();
    let engine = support::builder(queue)
        .await
        .large_payloads(payloads)
        .build()
        .expect("engine");
    let running = support::spawn_engine(engine, {
        let seen = Arc::clone(&seen);
        move |message: Message| {
            let seen = Arc::clone(&seen);
            async move {
                let mut names: Vec<String> = message.message_attributes().keys().cloned().collect();
                names.sort();
                seen.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((message.into_body(), names));
                Outcome::Ack
            }
        }
    });
    if expected == 0 {
        tokio::time::sleep(Duration::from_secs(5)).await;
    } else {
        support::eventually(
            Duration::from_secs(30),
            "the handler sees the messages",
            || seen.lock().unwrap_or_else(PoisonError::into_inner).len() >= expected,
        )
        .await;
    }
    running.shutdown().await;
    seen
}

/// Waits until `bucket` holds `expected` objects, for at most 10 s.
async fn until_objects(s3: &aws_sdk_s3::Client, bucket: &str, expected: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let keys = objects(s3, bucket).await;
        if keys.len() == expected || tokio::time::Instant::now() >= deadline {
            return keys;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_the_python_extended_client_stored_in_s3_reaches_the_handler_whole_and_goes_with_the_ack()
 {
    let place = Place::new("large-in").await;
    let body = place.sent_by_the_extended_client(300_000);
    assert_eq!(
        objects(&place.s3, &place.bucket).await.len(),
        1,
        "the extended client stored the 300,000-byte body in S3"
    );

    let seen = receive_with(&place.queue, LargePayloads::new(place.s3.clone()), 1).await;

    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(PoisonError::into_inner));
    assert_eq!(seen.len(), 1, "one message");
    assert!(seen[0].0 == body, "the handler got the stored body whole");
    assert!(
        seen[0].1.is_empty(),
        "the marking attribute is not among the message's attributes: {:?}",
        seen[0].1
    );
    assert_eq!(
        until_objects(&place.s3, &place.bucket, 0).await,
        Vec::<String>::new(),
        "the object is deleted once SQS deleted the message"
    );
    assert_eq!(
        support::counts(&place.sqs, &place.url).await,
        (0, 0),
        "the message is deleted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_objects_leaves_the_object_after_the_ack() {
    let place = Place::new("large-keep").await;
    let body = place.sent_by_the_extended_client(270_000);

    let seen = receive_with(
        &place.queue,
        LargePayloads::new(place.s3.clone()).keep_objects(),
        1,
    )
    .await;

    assert!(
        seen.lock().unwrap_or_else(PoisonError::into_inner)[0].0 == body,
        "the handler got the stored body whole"
    );
    assert_eq!(
        support::counts(&place.sqs, &place.url).await,
        (0, 0),
        "the message is deleted"
    );
    assert_eq!(
        objects(&place.s3, &place.bucket).await.len(),
        1,
        "the object stays with keep_objects"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pointer_to_a_missing_object_never_reaches_the_handler_and_the_message_stays() {
    let log =
        support::LogCapture::install(tracing::Level::WARN, support::log_capture::FmtSpan::NONE);
    let Place {
        s3,
        sqs,
        bucket,
        queue,
        url,
    } = Place::new("large-missing").await;
    let pointer = format!(
        r#"["software.amazon.payloadoffloading.PayloadS3Pointer",{{"s3BucketName":"{bucket}","s3Key":"gone"}}]"#
    );
    sqs.send_message()
        .queue_url(&url)
        .message_body(&pointer)
        .message_attributes(
            "ExtendedPayloadSize",
            MessageAttributeValue::builder()
                .data_type("Number")
                .string_value("300000")
                .build()
                .expect("attribute"),
        )
        .send()
        .await
        .expect("SendMessage");

    let seen = receive_with(&queue, LargePayloads::new(s3.clone()), 0).await;

    assert!(
        seen.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty(),
        "the handler never sees a message whose body cannot be read"
    );
    let (visible, in_flight) = support::counts(&sqs, &url).await;
    assert_eq!(
        visible + in_flight,
        1,
        "the message stays in the queue, returned by the error policy"
    );
    let text = log.text();
    assert!(
        text.contains("cannot be read") && text.contains(&format!("s3://{bucket}/gone")),
        "the warning names the message's object: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_stores_a_large_body_that_the_python_extended_client_receives_whole() {
    let place = Place::new("large-out").await;
    let connected = SqsBroker::new()
        .endpoint(support::endpoint())
        .region("us-east-1")
        .test_credentials()
        .large_payloads(LargePayloads::new(place.s3.clone()).bucket(&place.bucket))
        .connect()
        .await
        .expect("connect");
    let publisher = connected.publisher();
    publish_large_and_small(&place, |body| {
        publisher.publish(
            OutgoingMessage::produced(&place.queue, ruststream::BytesMut::from(body.as_bytes()))
                .with_headers(HeaderMap::new()),
            None,
        )
    })
    .await;
    connected.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_native_publisher_stores_a_large_body_that_the_python_extended_client_receives_whole() {
    let place = Place::new("large-native").await;
    let publisher = sqs_engine::Publisher::builder()
        .sdk_config(&support::sdk_config().await)
        .large_payloads(LargePayloads::new(place.s3.clone()).bucket(&place.bucket))
        .build()
        .expect("publisher");
    publish_large_and_small(&place, |body| {
        publisher.send(&place.queue, sqs_engine::OutgoingMessage::new(body))
    })
    .await;
    publisher.close().await;
}

/// Publishes a body over the threshold and a small one to `place`'s queue with `publish`, then
/// checks that only the large one went to S3 and that the Python extended client reads both
/// whole.
async fn publish_large_and_small<F, E>(place: &Place, publish: impl Fn(String) -> F)
where
    F: Future<Output = Result<(), E>>,
    E: std::fmt::Debug,
{
    let large = large_body(600_000);
    let small = "a small body stays in SQS".to_owned();
    for result in join_all([&large, &small].map(|body| publish(body.clone()))).await {
        result.expect("published");
    }
    assert_eq!(
        objects(&place.s3, &place.bucket).await.len(),
        1,
        "only the body over the threshold went to S3"
    );
    extended_client_reads(&place.url, &place.bucket, &[&large, &small]);
}

/// Receives as many messages from `url` with the Python extended client as `bodies` has, and
/// checks that it read each of them whole (bodies of distinct lengths).
fn extended_client_reads(url: &str, bucket: &str, bodies: &[&String]) {
    let mut received = HashMap::new();
    for n in 0..bodies.len() {
        let file = body_file(&format!("read-{n}"));
        extended_client("receive", url, bucket, &file);
        let body = std::fs::read_to_string(&file).expect("the body received");
        received.insert(body.len(), body);
    }
    for body in bodies {
        assert!(
            received.get(&body.len()) == Some(*body),
            "the extended client did not read the body of {} bytes whole",
            body.len()
        );
    }
}
