//! The RustStream framework's conformance suites, twice: live against LocalStack, and in
//! process (the broker wrapped in `InProcessBroker`, on its in-process SQS). Then the
//! in-process suite of its own (`harness::run_suite`), the checks that hold the in-process
//! transport to LocalStack (`settlement::matches_in_process`, `refuses_like_the_server`), and
//! the one known gap, pinned.
//!
//! Each suite names the step that fails. Sources create their queues, since every suite works
//! on queues of its own (`conformance.<suite>.<pid>-<nanos>-<seq>`, dots mapped to dashes).

use sqs_engine_test_support as support;

use std::num::NonZeroU32;
use std::time::Duration;

use ruststream::conformance::harness::{self, InProcessBroker};
use ruststream::conformance::in_process::{Refusal, refuses_like_the_server};
use ruststream::conformance::message_shape::{self, OptionCases};
use ruststream::conformance::{capabilities, lifecycle, retry, settlement};
use ruststream::testing::{Backlog, InProcess};
use ruststream::{Bytes, ConnectedBroker, OutgoingMessage};
use sqs_engine::prelude::*;
use subscription_queue::queue;

#[path = "subscription/queue.rs"]
mod subscription_queue;

/// The broker as a deployment configures it: against LocalStack when connected live, on its
/// own in-process SQS when wrapped in `InProcessBroker`. Bare-name subscriptions create their
/// queues, since every suite's names are new on the server.
fn broker() -> SqsBroker {
    SqsBroker::new()
        .endpoint(support::endpoint())
        .region("us-east-1")
        .test_credentials()
        .create_if_missing()
}

fn in_process() -> InProcessBroker<SqsBroker> {
    InProcessBroker::new(broker())
}

/// As [`queue`], with a short visibility, for the suites that wait for an unsettled delivery
/// to come back.
fn leased(name: &str) -> SqsQueue {
    queue(name).visibility(Duration::from_secs(2))
}

fn publisher(connected: &ConnectedSqsBroker) -> SqsPublisher {
    connected.publisher()
}

/// How long the settlement suite waits for a redelivery: the lease and a margin.
const REDELIVERY: Duration = Duration::from_secs(8);

/// The suites a broker runs live, once per transport: `live` on LocalStack, `in_process` on
/// the in-process SQS.
macro_rules! suites {
    ($($transport:ident => $broker:expr;)*) => {$(
        mod $transport {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn lifecycle_with_sqs_queue() {
                Box::pin(harness::lifecycle($broker, leased, publisher)).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn lifecycle_with_a_bare_name() {
                Box::pin(harness::lifecycle(
                    $broker,
                    |name: &str| Name::new(name.to_owned()),
                    publisher,
                ))
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn shutdown_flushes_an_ack_and_a_publish() {
                Box::pin(lifecycle::shutdown_flushes(
                    $broker,
                    leased,
                    publisher,
                    Backlog::Delivered,
                ))
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn settlement() {
                Box::pin(settlement::suite($broker, leased, publisher, REDELIVERY)).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn broker_moves_spent_messages_with_sqs_queue() {
                Box::pin(retry::broker_moves(
                    $broker,
                    queue,
                    publisher,
                    NonZeroU32::new(3).expect("non-zero"),
                ))
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn broker_moves_spent_messages_with_a_bare_name() {
                Box::pin(retry::broker_moves(
                    $broker,
                    |name: &str| Name::new(name.to_owned()),
                    publisher,
                    NonZeroU32::new(3).expect("non-zero"),
                ))
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn batches() {
                Box::pin(capabilities::batches($broker, queue, publisher)).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn keyed_order_on_a_fifo_queue() {
                let subject = format!("{}.fifo", support::unique("conformance.keyed"));
                Box::pin(message_shape::keyed_order(
                    $broker,
                    &subject,
                    queue,
                    publisher,
                    |key: &[u8], _headers: &mut HeaderMap| {
                        Some(SqsPublishOptions::default().group_id(String::from_utf8_lossy(key)))
                    },
                ))
                .await;
            }

            /// The portable spelling: the key in the `partition-key` header, no options.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn keyed_order_on_a_fifo_queue_by_the_partition_key_header() {
                let subject = format!("{}.fifo", support::unique("conformance.keyed-header"));
                Box::pin(message_shape::keyed_order(
                    $broker,
                    &subject,
                    queue,
                    publisher,
                    |key: &[u8], headers: &mut HeaderMap| {
                        headers.insert(PARTITION_KEY_HEADER, Bytes::copy_from_slice(key));
                        None
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
                    $broker,
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
                Box::pin(lifecycle::shared_handle_closes($broker, queue, publisher)).await;
            }
        }
    )*};
}

suites! {
    live => broker;
    in_process => in_process;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_process_suite() {
    Box::pin(harness::run_suite(broker)).await;
}

/// Every settlement answered in process as LocalStack answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settlement_answers_match_localstack() {
    Box::pin(settlement::matches_in_process(
        broker, leased, publisher, REDELIVERY,
    ))
    .await;
}

/// The gap of the in-process mode, pinned: every queue a service names exists in process, so
/// a publish to a queue nobody created is taken there, while LocalStack refuses it. (This is
/// why `in_process::backlog_matches_server`, which publishes to such a queue first, is not
/// run.) A missing queue is covered live: `ruststream_broker.rs` and `ruststream_seeds.rs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_nobody_created_exists_in_process_only() {
    let name = support::unique("never-created").replace('.', "-");
    let payload = b"to a queue nobody created".as_slice();

    let live = SqsBroker::new()
        .endpoint(support::endpoint())
        .region("us-east-1")
        .test_credentials()
        .connect()
        .await
        .expect("connect");
    let refused = live
        .publisher()
        .publish(OutgoingMessage::new(&name, payload), None)
        .await;
    assert!(
        refused.is_err(),
        "LocalStack took a publish to a queue that does not exist"
    );
    live.shutdown().await.expect("shutdown");

    let connected = broker()
        .connect_in_process()
        .await
        .expect("connect in process");
    connected
        .publisher()
        .publish(OutgoingMessage::new(&name, payload), None)
        .await
        .expect("in process, every queue exists");
    connected.shutdown().await.expect("shutdown");
}

/// What LocalStack refuses, the in-process SQS refuses: a body one byte over 1 MiB (exactly
/// 1 MiB is delivered), a queue name over 80 characters to publish to or subscribe to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_match_localstack() {
    let name = support::unique("conformance-refusals").replace('.', "-");
    Box::pin(refuses_like_the_server(
        broker,
        publisher,
        [
            Refusal::PayloadOver {
                name,
                limit: 1_048_576,
            },
            Refusal::Publish {
                name: "n".repeat(81),
            },
            Refusal::Subscription {
                source: SqsQueue::new("s".repeat(81)).create_if_missing(),
            },
        ],
    ))
    .await;
}
