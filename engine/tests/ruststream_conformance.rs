//! The RustStream framework's conformance suites, live against LocalStack.
//!
//! Each suite names the step that fails. Sources create their queues, since every suite works
//! on queues of its own (`conformance.<suite>.<pid>-<nanos>-<seq>`, dots mapped to dashes).

mod support;

use std::num::NonZeroU32;
use std::time::Duration;

use ruststream::conformance::message_shape::{self, OptionCases};
use ruststream::conformance::{capabilities, harness, lifecycle, retry, settlement};
use ruststream::testing::Backlog;
use sqs_engine::prelude::*;

fn broker() -> SqsBroker {
    SqsBroker::new()
        .endpoint(support::endpoint())
        .region("us-east-1")
        .test_credentials()
}

/// A queue the suite owns, with a short long poll so that subscriptions stop quickly.
fn queue(name: &str) -> SqsQueue {
    SqsQueue::new(name)
        .create_if_missing()
        .wait(Duration::from_secs(1))
}

/// As [`queue`], with a short visibility, for the suites that wait for an unsettled delivery
/// to come back.
fn leased(name: &str) -> SqsQueue {
    queue(name).visibility(Duration::from_secs(2))
}

/// How long the settlement suite waits for a redelivery: the lease and a margin.
const REDELIVERY: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_with_sqs_queue() {
    Box::pin(harness::lifecycle(
        broker,
        leased,
        |c: &ConnectedSqsBroker| c.publisher(),
    ))
    .await;
}

/// A broker whose bare-name subscriptions create their queues, as the suites' names are new.
fn creating_broker() -> SqsBroker {
    broker().create_if_missing()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_with_a_bare_name() {
    Box::pin(harness::lifecycle(
        creating_broker,
        |name: &str| Name::new(name.to_owned()),
        |c: &ConnectedSqsBroker| c.publisher(),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_flushes_an_ack_and_a_publish() {
    Box::pin(lifecycle::shutdown_flushes(
        broker,
        leased,
        |c: &ConnectedSqsBroker| c.publisher(),
        Backlog::Delivered,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settlement() {
    Box::pin(settlement::suite(
        broker,
        leased,
        |c: &ConnectedSqsBroker| c.publisher(),
        REDELIVERY,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_moves_spent_messages_with_sqs_queue() {
    Box::pin(retry::broker_moves(
        broker,
        queue,
        |c: &ConnectedSqsBroker| c.publisher(),
        NonZeroU32::new(3).expect("non-zero"),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches() {
    Box::pin(capabilities::batches(
        broker,
        queue,
        |c: &ConnectedSqsBroker| c.publisher(),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_moves_spent_messages_with_a_bare_name() {
    Box::pin(retry::broker_moves(
        creating_broker,
        |name: &str| Name::new(name.to_owned()),
        |c: &ConnectedSqsBroker| c.publisher(),
        NonZeroU32::new(3).expect("non-zero"),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_order_on_a_fifo_queue() {
    let subject = format!("{}.fifo", support::unique("conformance.keyed"));
    Box::pin(message_shape::keyed_order(
        broker,
        &subject,
        queue,
        |c: &ConnectedSqsBroker| c.publisher(),
        |key: &[u8], _headers: &mut HeaderMap| {
            Some(SqsPublishOptions::default().group_id(String::from_utf8_lossy(key)))
        },
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_options_override_the_policy_and_refused_values_error() {
    let subject = format!("{}.fifo", support::unique("conformance.options"));
    let cases = OptionCases::new(Some(b"policy-group".to_vec()))
        .overrides(
            SqsPublishOptions::default().group_id("call-group"),
            Some(b"call-group".to_vec()),
        )
        .refuses(SqsPublishOptions::default().group_id("g".repeat(129)))
        .refuses(SqsPublishOptions::default().group_id("has space"))
        .refuses(SqsPublishOptions::default().deduplication_id("d".repeat(129)));
    Box::pin(message_shape::publish_options(
        broker,
        &subject,
        queue,
        Publish::default().group_id("policy-group"),
        cases,
        |delivery: &SqsMessage| delivery.partition_key().map(<[u8]>::to_vec),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_connection_closes_for_every_clone() {
    Box::pin(lifecycle::shared_handle_closes(
        broker,
        queue,
        |c: &ConnectedSqsBroker| c.publisher(),
    ))
    .await;
}
