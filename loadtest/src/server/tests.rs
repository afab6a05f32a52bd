//! The embedded server driven by a real `aws_sdk_sqs::Client` over loopback HTTP, through
//! every action it implements. Times are real: visibility timeouts of 1 s, long polls of a
//! few seconds.

use std::collections::HashMap;
use std::fmt::Debug;
use std::net::SocketAddr;
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::{
    BatchResultErrorEntry, ChangeMessageVisibilityBatchRequestEntry,
    DeleteMessageBatchRequestEntry, MessageAttributeValue, MessageSystemAttributeName,
    QueueAttributeName, SendMessageBatchRequestEntry,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::EmbeddedSqs;
use super::protocol::md5_hex;

/// A server on a free loopback port, and a client configured for it.
pub(super) async fn start() -> (EmbeddedSqs, Client) {
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("a valid address");
    let server = EmbeddedSqs::start(addr).expect("the server starts");
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(server.endpoint())
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .build();
    (server, Client::from_conf(config))
}

/// Creates queue `name` with `attributes`; answers its URL.
pub(super) async fn create(
    client: &Client,
    name: &str,
    attributes: &[(QueueAttributeName, &str)],
) -> String {
    let mut call = client.create_queue().queue_name(name);
    for (attribute, value) in attributes {
        call = call.attributes(attribute.clone(), *value);
    }
    call.send()
        .await
        .expect("CreateQueue succeeds")
        .queue_url
        .expect("CreateQueue answers a URL")
}

/// The named attributes of queue `url`.
pub(super) async fn attributes(client: &Client, url: &str) -> HashMap<QueueAttributeName, String> {
    client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .expect("GetQueueAttributes succeeds")
        .attributes
        .unwrap_or_default()
}

/// Sends `body` to `url`.
pub(super) async fn send(client: &Client, url: &str, body: &str) {
    client
        .send_message()
        .queue_url(url)
        .message_body(body)
        .send()
        .await
        .expect("SendMessage succeeds");
}

/// Deletes the message received from `url` with `handle`.
async fn delete(client: &Client, url: &str, handle: &str) {
    client
        .delete_message()
        .queue_url(url)
        .receipt_handle(handle)
        .send()
        .await
        .expect("DeleteMessage succeeds");
}

/// Receives up to `max` messages, waiting up to `wait` seconds, with `visibility` when
/// given, asking for all attributes as the engine does.
pub(super) async fn receive(
    client: &Client,
    url: &str,
    max: i32,
    wait: i32,
    visibility: Option<i32>,
) -> Vec<aws_sdk_sqs::types::Message> {
    client
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(max)
        .wait_time_seconds(wait)
        .set_visibility_timeout(visibility)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
        .send()
        .await
        .expect("ReceiveMessage succeeds")
        .messages
        .unwrap_or_default()
}

/// The `ApproximateNumberOfMessages` and `ApproximateNumberOfMessagesNotVisible` of queue
/// `url`.
pub(super) async fn visible_and_in_flight(client: &Client, url: &str) -> [String; 2] {
    let mut all = attributes(client, url).await;
    [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
    ]
    .map(|name| {
        all.remove(&name)
            .expect("GetQueueAttributes answers the message counts")
    })
}

/// Asserts that `error` is an error answer that `is` recognises.
#[track_caller]
pub(super) fn assert_service_error<E: Debug, R: Debug>(
    error: &SdkError<E, R>,
    is: impl FnOnce(&E) -> bool,
) {
    assert!(error.as_service_error().is_some_and(is), "{error:?}");
}

/// Asserts that `failed`, the failed entries of a batch answer, is the one entry `id`,
/// refused with `code` as the caller's fault.
#[track_caller]
fn assert_one_failed(failed: &[BatchResultErrorEntry], id: &str, code: &str) {
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].id(), id);
    assert_eq!(failed[0].code(), code);
    assert!(failed[0].sender_fault());
}

/// The `ApproximateReceiveCount` of `message`.
pub(super) fn receive_count(message: &aws_sdk_sqs::types::Message) -> u32 {
    message
        .attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
        .and_then(|count| count.parse().ok())
        .expect("the message has an ApproximateReceiveCount")
}

#[tokio::test]
async fn queues_are_created_found_listed_configured_purged_and_deleted() {
    let (server, client) = start().await;
    let url = create(
        &client,
        "orders",
        &[(QueueAttributeName::VisibilityTimeout, "45")],
    )
    .await;
    assert_eq!(url, format!("{}/000000000000/orders", server.endpoint()));

    // CreateQueue is idempotent with the same attributes, refused with different ones.
    assert_eq!(
        create(
            &client,
            "orders",
            &[(QueueAttributeName::VisibilityTimeout, "45")]
        )
        .await,
        url
    );
    let error = client
        .create_queue()
        .queue_name("orders")
        .attributes(QueueAttributeName::VisibilityTimeout, "46")
        .send()
        .await
        .expect_err("different attributes are refused");
    assert_service_error(&error, |e| e.is_queue_name_exists());
    let error = client
        .create_queue()
        .queue_name("bad name")
        .send()
        .await
        .expect_err("an invalid name is refused");
    assert_eq!(error.code(), Some("InvalidParameterValue"));

    let found = client
        .get_queue_url()
        .queue_name("orders")
        .send()
        .await
        .expect("GetQueueUrl succeeds");
    assert_eq!(found.queue_url(), Some(url.as_str()));
    let error = client
        .get_queue_url()
        .queue_name("missing")
        .send()
        .await
        .expect_err("a missing queue has no URL");
    assert_service_error(&error, |e| e.is_queue_does_not_exist());

    let all = attributes(&client, &url).await;
    assert_eq!(all[&QueueAttributeName::VisibilityTimeout], "45");
    assert_eq!(
        all[&QueueAttributeName::QueueArn],
        "arn:aws:sqs:us-east-1:000000000000:orders"
    );
    assert_eq!(all[&QueueAttributeName::ApproximateNumberOfMessages], "0");
    assert_eq!(
        all[&QueueAttributeName::ApproximateNumberOfMessagesNotVisible],
        "0"
    );
    assert!(!all.contains_key(&QueueAttributeName::RedrivePolicy));
    assert!(!all.contains_key(&QueueAttributeName::FifoQueue));

    create(&client, "dlq", &[]).await;
    let redrive =
        r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":"3"}"#;
    client
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::RedrivePolicy, redrive)
        .attributes(QueueAttributeName::VisibilityTimeout, "10")
        .send()
        .await
        .expect("SetQueueAttributes succeeds");
    let named = client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::RedrivePolicy)
        .attribute_names(QueueAttributeName::VisibilityTimeout)
        .send()
        .await
        .expect("GetQueueAttributes succeeds")
        .attributes
        .unwrap_or_default();
    assert_eq!(named.len(), 2);
    assert_eq!(named[&QueueAttributeName::RedrivePolicy], redrive);
    assert_eq!(named[&QueueAttributeName::VisibilityTimeout], "10");
    let error = client
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::VisibilityTimeout, "50000")
        .send()
        .await
        .expect_err("an out-of-range value is refused");
    assert_service_error(&error, |e| e.is_invalid_attribute_value());

    let fifo = create(
        &client,
        "orders.fifo",
        &[(QueueAttributeName::FifoQueue, "true")],
    )
    .await;
    assert_eq!(
        attributes(&client, &fifo).await[&QueueAttributeName::FifoQueue],
        "true"
    );
    create(&client, "other", &[]).await;

    let listed = client
        .list_queues()
        .queue_name_prefix("orders")
        .send()
        .await
        .expect("ListQueues succeeds");
    assert_eq!(listed.queue_urls(), [url.clone(), fifo.clone()]);
    let page = client
        .list_queues()
        .max_results(2)
        .send()
        .await
        .expect("ListQueues succeeds");
    assert_eq!(page.queue_urls().len(), 2);
    let token = page
        .next_token()
        .expect("the third and fourth queues are on another page");
    let rest = client
        .list_queues()
        .max_results(2)
        .next_token(token)
        .send()
        .await
        .expect("ListQueues succeeds");
    assert_eq!(rest.queue_urls().len(), 2);
    assert_eq!(rest.next_token(), None);

    send(&client, &url, "a").await;
    send(&client, &url, "b").await;
    assert_eq!(
        attributes(&client, &url).await[&QueueAttributeName::ApproximateNumberOfMessages],
        "2"
    );
    client
        .purge_queue()
        .queue_url(&url)
        .send()
        .await
        .expect("PurgeQueue succeeds");
    assert!(receive(&client, &url, 10, 0, None).await.is_empty());

    client
        .delete_queue()
        .queue_url(&url)
        .send()
        .await
        .expect("DeleteQueue succeeds");
    let error = client
        .send_message()
        .queue_url(&url)
        .message_body("late")
        .send()
        .await
        .expect_err("a deleted queue takes no messages");
    assert_service_error(&error, |e| e.is_queue_does_not_exist());
    server.shutdown().await.expect("the server shuts down");
}

#[tokio::test]
async fn a_message_is_sent_received_with_its_attributes_and_deleted() {
    let (server, client) = start().await;
    let url = create(&client, "q", &[]).await;
    let body = "hello, SQS \u{1F600}";
    let before = super::queue::epoch_millis();
    let sent = client
        .send_message()
        .queue_url(&url)
        .message_body(body)
        .message_attributes(
            "kind",
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value("greeting")
                .build()
                .expect("a valid attribute"),
        )
        .message_attributes(
            "size",
            MessageAttributeValue::builder()
                .data_type("Number")
                .string_value("42")
                .build()
                .expect("a valid attribute"),
        )
        .message_attributes(
            "blob",
            MessageAttributeValue::builder()
                .data_type("Binary")
                .binary_value(Blob::new(vec![0, 1, 2, 255]))
                .build()
                .expect("a valid attribute"),
        )
        .send()
        .await
        .expect("SendMessage succeeds");
    assert_eq!(
        sent.md5_of_message_body(),
        Some(md5_hex(body.as_bytes()).as_str())
    );
    assert!(sent.md5_of_message_attributes().is_some());
    let message_id = sent.message_id().expect("a message id").to_owned();

    let messages = receive(&client, &url, 10, 0, None).await;
    assert_eq!(messages.len(), 1);
    let message = &messages[0];
    assert_eq!(message.message_id(), Some(message_id.as_str()));
    assert_eq!(message.body(), Some(body));
    assert_eq!(
        message.md5_of_body(),
        Some(md5_hex(body.as_bytes()).as_str())
    );
    assert_eq!(
        message.md5_of_message_attributes(),
        sent.md5_of_message_attributes()
    );
    let system = message.attributes().expect("system attributes");
    assert_eq!(receive_count(message), 1);
    let sent_at: u64 = system[&MessageSystemAttributeName::SentTimestamp]
        .parse()
        .expect("SentTimestamp is epoch millis");
    assert!(sent_at >= before && sent_at <= super::queue::epoch_millis());
    assert!(system.contains_key(&MessageSystemAttributeName::ApproximateFirstReceiveTimestamp));
    assert_eq!(
        system[&MessageSystemAttributeName::SenderId],
        "000000000000"
    );
    let custom = message.message_attributes().expect("message attributes");
    assert_eq!(custom.len(), 3);
    assert_eq!(custom["kind"].string_value(), Some("greeting"));
    assert_eq!(custom["size"].data_type(), "Number");
    assert_eq!(
        custom["blob"].binary_value().map(Blob::as_ref),
        Some([0u8, 1, 2, 255].as_slice())
    );

    // Only the attributes asked for come back.
    send(&client, &url, "plain").await;
    let bare = client
        .receive_message()
        .queue_url(&url)
        .send()
        .await
        .expect("ReceiveMessage succeeds")
        .messages
        .unwrap_or_default();
    assert_eq!(bare.len(), 1);
    assert!(bare[0].attributes().is_none());
    assert!(bare[0].message_attributes().is_none());

    let handle = message.receipt_handle().expect("a receipt handle");
    delete(&client, &url, handle).await;
    // Deleting a message already gone succeeds again, as on SQS.
    delete(&client, &url, handle).await;
    assert_eq!(visible_and_in_flight(&client, &url).await, ["0", "1"]);
    server.shutdown().await.expect("the server shuts down");
}

#[tokio::test]
async fn batches_succeed_and_fail_entry_by_entry() {
    let (server, client) = start().await;
    let url = create(&client, "q", &[]).await;
    let mut call = client.send_message_batch().queue_url(&url);
    for i in 0..10 {
        // Entry 7 has a body SQS refuses.
        let body = if i == 7 {
            "\u{0}".to_owned()
        } else {
            format!("m{i}")
        };
        call = call.entries(
            SendMessageBatchRequestEntry::builder()
                .id(format!("e{i}"))
                .message_body(body)
                .build()
                .expect("a valid entry"),
        );
    }
    let sent = call.send().await.expect("SendMessageBatch succeeds");
    assert_eq!(sent.successful().len(), 9);
    assert_one_failed(sent.failed(), "e7", "InvalidMessageContents");
    for entry in sent.successful() {
        let i: usize = entry.id()[1..].parse().expect("ids are e<number>");
        assert_eq!(
            entry.md5_of_message_body(),
            md5_hex(format!("m{i}").as_bytes())
        );
    }

    let messages = receive(&client, &url, 10, 0, None).await;
    assert_eq!(messages.len(), 9);
    let mut call = client.delete_message_batch().queue_url(&url);
    for (i, message) in messages.iter().enumerate() {
        call = call.entries(
            DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(message.receipt_handle().expect("a handle"))
                .build()
                .expect("a valid entry"),
        );
    }
    call = call.entries(
        DeleteMessageBatchRequestEntry::builder()
            .id("bogus")
            .receipt_handle("not-a-receipt-handle")
            .build()
            .expect("a valid entry"),
    );
    let deleted = call.send().await.expect("DeleteMessageBatch succeeds");
    assert_eq!(deleted.successful().len(), 9);
    assert_one_failed(deleted.failed(), "bogus", "ReceiptHandleIsInvalid");
    assert_eq!(visible_and_in_flight(&client, &url).await, ["0", "0"]);

    // Whole-batch errors.
    let error = client
        .delete_message_batch()
        .queue_url(&url)
        .send()
        .await
        .expect_err("an empty batch is refused");
    assert_service_error(&error, |e| e.is_empty_batch_request());
    let entry = |id: &str| {
        SendMessageBatchRequestEntry::builder()
            .id(id)
            .message_body("x")
            .build()
            .expect("a valid entry")
    };
    let error = client
        .send_message_batch()
        .queue_url(&url)
        .entries(entry("same"))
        .entries(entry("same"))
        .send()
        .await
        .expect_err("duplicate ids are refused");
    assert_service_error(&error, |e| e.is_batch_entry_ids_not_distinct());
    let mut call = client.send_message_batch().queue_url(&url);
    for i in 0..11 {
        call = call.entries(entry(&i.to_string()));
    }
    let error = call.send().await.expect_err("eleven entries are refused");
    assert_service_error(&error, |e| e.is_too_many_entries_in_batch_request());
    server.shutdown().await.expect("the server shuts down");
}

#[tokio::test]
async fn an_unacked_message_comes_back_with_a_higher_receive_count() {
    let (server, client) = start().await;
    let url = create(&client, "q", &[]).await;
    send(&client, &url, "again").await;

    let first = receive(&client, &url, 1, 0, Some(1)).await;
    assert_eq!(first.len(), 1);
    assert_eq!(receive_count(&first[0]), 1);
    assert!(
        receive(&client, &url, 1, 0, None).await.is_empty(),
        "in flight, so not receivable"
    );
    assert_eq!(
        attributes(&client, &url).await[&QueueAttributeName::ApproximateNumberOfMessagesNotVisible],
        "1"
    );

    // The long poll wakes when the visibility timeout lapses, not at the end of its wait.
    let started = Instant::now();
    let second = receive(&client, &url, 1, 5, Some(30)).await;
    let waited = started.elapsed();
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].message_id(), first[0].message_id());
    assert_eq!(receive_count(&second[0]), 2);
    assert_ne!(second[0].receipt_handle(), first[0].receipt_handle());
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(3),
        "waited {waited:?}"
    );

    // The first receive's handle is stale now.
    let stale = first[0].receipt_handle().expect("a handle");
    let error = client
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(stale)
        .visibility_timeout(0)
        .send()
        .await
        .expect_err("a stale handle is refused");
    assert_service_error(&error, |e| e.is_receipt_handle_is_invalid());

    // ChangeMessageVisibility to 0 makes it receivable at once.
    let current = second[0].receipt_handle().expect("a handle");
    client
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(current)
        .visibility_timeout(0)
        .send()
        .await
        .expect("ChangeMessageVisibility succeeds");
    let third = receive(&client, &url, 1, 0, Some(30)).await;
    assert_eq!(third.len(), 1);
    assert_eq!(receive_count(&third[0]), 3);

    // The batch form: the current handle succeeds, a stale one fails on its own.
    let changed = client
        .change_message_visibility_batch()
        .queue_url(&url)
        .entries(
            ChangeMessageVisibilityBatchRequestEntry::builder()
                .id("current")
                .receipt_handle(third[0].receipt_handle().expect("a handle"))
                .visibility_timeout(0)
                .build()
                .expect("a valid entry"),
        )
        .entries(
            ChangeMessageVisibilityBatchRequestEntry::builder()
                .id("stale")
                .receipt_handle(current)
                .visibility_timeout(0)
                .build()
                .expect("a valid entry"),
        )
        .send()
        .await
        .expect("ChangeMessageVisibilityBatch succeeds");
    assert_eq!(changed.successful().len(), 1);
    assert_eq!(changed.successful()[0].id(), "current");
    assert_one_failed(changed.failed(), "stale", "ReceiptHandleIsInvalid");
    let fourth = receive(&client, &url, 1, 0, None).await;
    assert_eq!(fourth.len(), 1);
    assert_eq!(receive_count(&fourth[0]), 4);
    server.shutdown().await.expect("the server shuts down");
}

#[tokio::test]
async fn a_long_poll_answers_as_soon_as_a_message_arrives() {
    let (server, client) = start().await;
    let url = create(&client, "q", &[]).await;
    let poll = {
        let client = client.clone();
        let url = url.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let messages = receive(&client, &url, 10, 10, None).await;
            (messages, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    send(&client, &url, "wake up").await;
    let (messages, waited) = poll.await.expect("the poll task completes");
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].body(), Some("wake up"));
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(3),
        "waited {waited:?}"
    );

    // With nothing to receive, it answers empty when the wait is over.
    let started = Instant::now();
    assert!(receive(&client, &url, 10, 1, None).await.is_empty());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(3),
        "waited {waited:?}"
    );
    server.shutdown().await.expect("the server shuts down");
}

#[tokio::test]
async fn a_delayed_message_becomes_receivable_after_its_delay() {
    let (server, client) = start().await;
    let url = create(&client, "q", &[]).await;
    client
        .send_message()
        .queue_url(&url)
        .message_body("later")
        .delay_seconds(1)
        .send()
        .await
        .expect("SendMessage succeeds");
    assert!(receive(&client, &url, 1, 0, None).await.is_empty());
    assert_eq!(
        attributes(&client, &url).await[&QueueAttributeName::ApproximateNumberOfMessagesDelayed],
        "1"
    );
    let started = Instant::now();
    let messages = receive(&client, &url, 1, 5, None).await;
    assert_eq!(messages.len(), 1);
    assert!(started.elapsed() < Duration::from_secs(3));
    server.shutdown().await.expect("the server shuts down");
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let (server, client) = start().await;
    let url = create(&client, "q", &[]).await;
    let error = client
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(11)
        .send()
        .await
        .expect_err("11 messages is too many");
    assert_eq!(error.code(), Some("InvalidParameterValue"));
    assert!(
        error
            .message()
            .is_some_and(|m| m.contains("MaxNumberOfMessages"))
    );

    // An SQS action the server does not implement.
    let error = client
        .tag_queue()
        .queue_url(&url)
        .tags("team", "core")
        .send()
        .await
        .expect_err("TagQueue is not implemented");
    assert_service_error(&error, |e| e.is_unsupported_operation());
    assert!(error.message().is_some_and(|m| m.contains("TagQueue")));

    // Something that is no SQS request at all.
    let addr = server
        .endpoint()
        .strip_prefix("http://")
        .expect("an http endpoint")
        .to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("the server accepts connections");
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("the request is written");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("the response is read");
    assert!(response.starts_with("HTTP/1.1 400"), "{response}");
    assert!(response.contains("UnknownOperationException"), "{response}");
    server.shutdown().await.expect("the server shuts down");
}

#[tokio::test]
async fn shutdown_ends_long_polls_at_once() {
    let (server, client) = start().await;
    let url = create(&client, "q", &[]).await;
    let poll = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .receive_message()
                .queue_url(url)
                .wait_time_seconds(20)
                .send()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    server.shutdown().await.expect("the server shuts down");
    let answered = poll.await.expect("the poll task completes");
    assert!(started.elapsed() < Duration::from_secs(3));
    let output = answered.expect("the long poll is answered, empty");
    assert!(output.messages().is_empty());
}

#[tokio::test]
async fn every_call_takes_the_latency_and_calls_wait_side_by_side() {
    let (server, client) = start().await;
    let url = create(&client, "latency", &[]).await;
    server.set_latency(super::Latency::Fixed { ms: 200.0 }, 1);
    // Ten calls at once on ten connections: each takes the latency, and together they take
    // about as long as one.
    let started = Instant::now();
    let calls = (0..10).map(|n| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let call = Instant::now();
            send(&client, &url, &format!("m{n}")).await;
            call.elapsed()
        }
    });
    let each = futures_join_all(calls).await;
    let all = started.elapsed();
    for one in &each {
        assert!(*one >= Duration::from_millis(199), "{each:?}");
    }
    assert!(
        all < Duration::from_millis(600),
        "{all:?} for ten calls at once"
    );
    // A long poll waits for its message, then takes the latency on top.
    server.set_latency(super::Latency::None, 1);
    let got = receive(&client, &url, 10, 0, None).await;
    assert_eq!(got.len(), 10);
    server.set_latency(super::Latency::Fixed { ms: 100.0 }, 1);
    let polling = Instant::now();
    let poll = {
        let client = client.clone();
        let url = url.clone();
        tokio::spawn(async move { receive(&client, &url, 1, 5, Some(30)).await.len() })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    send(&client, &url, "late").await;
    assert_eq!(poll.await.expect("the poll ends"), 1);
    let waited = polling.elapsed();
    assert!(
        waited >= Duration::from_millis(400 + 99) && waited < Duration::from_millis(1500),
        "{waited:?}"
    );
    server.shutdown().await.expect("the server stops");
}

#[tokio::test]
async fn an_overloaded_server_applies_a_receive_its_client_gave_up_on() {
    let (server, client) = start().await;
    let url = create(&client, "overloaded", &[]).await;
    for n in 0..20 {
        send(&client, &url, &format!("m{n}")).await;
    }
    // One call at a time, 20 ms a message held: 400 ms a call at 20 messages.
    server.set_overload(Some("1,20000".parse().expect("a valid overload")));
    let given_up = tokio::time::timeout(
        Duration::from_millis(100),
        receive(&client, &url, 10, 0, Some(60)),
    )
    .await;
    assert!(given_up.is_err(), "the receive answered within 100 ms");
    server.set_overload(None);
    // The server applies it all the same: its ten messages are in flight, and nobody holds
    // their receipts.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let counts = attributes(&client, &url).await;
        let hidden = &counts[&QueueAttributeName::ApproximateNumberOfMessagesNotVisible];
        if hidden == "10" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{hidden} messages in flight 10 s after the receive its client gave up on"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(receive(&client, &url, 10, 0, None).await.len(), 10);
    assert!(receive(&client, &url, 10, 0, None).await.is_empty());
    server.shutdown().await.expect("the server stops");
}

/// Runs the futures side by side and answers their outputs, in order.
async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut outputs = Vec::new();
    for handle in handles {
        outputs.push(handle.await.expect("the task ends"));
    }
    outputs
}

/// The `(group, sequence number, body)` of each message.
fn fifo_view(messages: &[aws_sdk_sqs::types::Message]) -> Vec<(String, String, String)> {
    messages
        .iter()
        .map(|message| {
            let attributes = message
                .attributes()
                .expect("system attributes were asked for");
            (
                attributes
                    .get(&MessageSystemAttributeName::MessageGroupId)
                    .cloned()
                    .expect("a FIFO message has its MessageGroupId"),
                attributes
                    .get(&MessageSystemAttributeName::SequenceNumber)
                    .cloned()
                    .expect("a FIFO message has its SequenceNumber"),
                message.body().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_fifo_queue_hands_out_each_group_in_order_and_one_batch_at_a_time() {
    let (_server, client) = start().await;
    let url = create(
        &client,
        "groups.fifo",
        &[(QueueAttributeName::FifoQueue, "true")],
    )
    .await;

    // A group is required, and a deduplication id without content-based deduplication.
    let refused = client
        .send_message()
        .queue_url(&url)
        .message_body("no group")
        .message_deduplication_id("d")
        .send()
        .await
        .expect_err("a FIFO message needs a group");
    assert_eq!(refused.code(), Some("MissingParameter"));
    let refused = client
        .send_message()
        .queue_url(&url)
        .message_body("no dedup")
        .message_group_id("a")
        .send()
        .await
        .expect_err("a FIFO message needs a deduplication id here");
    assert_eq!(refused.code(), Some("InvalidParameterValue"));

    // a1 b1 a2 a3 b2, interleaved; sequence numbers increase in send order.
    let mut sequence_numbers = Vec::new();
    for (index, (group, body)) in [
        ("a", "a1"),
        ("b", "b1"),
        ("a", "a2"),
        ("a", "a3"),
        ("b", "b2"),
    ]
    .into_iter()
    .enumerate()
    {
        let sent = client
            .send_message()
            .queue_url(&url)
            .message_body(body)
            .message_group_id(group)
            .message_deduplication_id(format!("m{index}"))
            .send()
            .await
            .expect("SendMessage succeeds");
        sequence_numbers.push(
            sent.sequence_number()
                .expect("a FIFO send answers its sequence number")
                .to_owned(),
        );
    }
    assert!(sequence_numbers.windows(2).all(|pair| pair[0] < pair[1]));
    // A duplicate within the window is answered, not stored.
    let duplicate = client
        .send_message()
        .queue_url(&url)
        .message_body("a1 again")
        .message_group_id("a")
        .message_deduplication_id("m0")
        .send()
        .await
        .expect("a duplicate send succeeds");
    assert_eq!(
        duplicate.sequence_number(),
        Some(sequence_numbers[0].as_str())
    );

    // One receive of two: group a's first two, consecutive, with their attributes.
    let first_messages = receive(&client, &url, 2, 0, Some(30)).await;
    let first = fifo_view(&first_messages);
    assert_eq!(
        first,
        [
            ("a".to_owned(), sequence_numbers[0].clone(), "a1".to_owned()),
            ("a".to_owned(), sequence_numbers[2].clone(), "a2".to_owned()),
        ]
    );
    // Group a is blocked while a1 and a2 are in flight: only b comes, both of it.
    let second = receive(&client, &url, 10, 0, Some(1)).await;
    let bodies: Vec<String> = fifo_view(&second).into_iter().map(|m| m.2).collect();
    assert_eq!(bodies, ["b1", "b2"]);
    // Nothing more while both groups have messages in flight.
    assert!(receive(&client, &url, 10, 0, Some(30)).await.is_empty());

    // b's messages come back in order after their visibility timeout.
    let again = receive(&client, &url, 10, 3, Some(30)).await;
    let bodies: Vec<String> = fifo_view(&again).into_iter().map(|m| m.2).collect();
    assert_eq!(bodies, ["b1", "b2"]);
    assert!(again.iter().all(|m| receive_count(m) == 2));

    // a3 waits until a1 and a2 are deleted; a long poll sees it as soon as they are.
    delete(
        &client,
        &url,
        first_messages[0].receipt_handle().unwrap_or_default(),
    )
    .await;
    assert!(receive(&client, &url, 10, 0, Some(30)).await.is_empty());
    let waiting = receive(&client, &url, 10, 5, Some(30));
    let deleting = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        delete(
            &client,
            &url,
            first_messages[1].receipt_handle().unwrap_or_default(),
        )
        .await;
    };
    let started = Instant::now();
    let (last, ()) = tokio::join!(waiting, deleting);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "woken by the delete"
    );
    let last = fifo_view(&last);
    assert_eq!(
        last,
        [("a".to_owned(), sequence_numbers[3].clone(), "a3".to_owned())]
    );
}
