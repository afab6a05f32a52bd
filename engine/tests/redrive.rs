//! The retry cap and dead-letter queue become the queue's redrive policy, on LocalStack.

use sqs_engine_test_support as support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use sqs_engine::{Engine, Error, Message, Outcome, RedriveWrite};
use support::*;

/// How long an invoice that is not ready waits before it is looked at again.
const RECHECK: Duration = Duration::from_secs(1);

async fn dead_letter_bodies(client: &aws_sdk_sqs::Client, name: &str) -> Vec<String> {
    let url = queue_url(client, name).await;
    let mut bodies = Vec::new();
    for _ in 0..3 {
        bodies.extend(
            receive_raw(client, &url, 1, 30)
                .await
                .into_iter()
                .filter_map(|m| m.body),
        );
    }
    bodies
}

/// The settings of an engine on `queue` that declares the redrive policy `max_attempts(cap)`,
/// `dead_letter(dead)`.
async fn declaring(queue: &str, cap: u32, dead: &str) -> sqs_engine::EngineBuilder {
    builder(queue).await.max_attempts(cap).dead_letter(dead)
}

/// Runs `engine`, acknowledging everything, for long enough to open its queue (and write its
/// redrive policy if it must); returns its statistics.
async fn opened_briefly(engine: Engine) -> sqs_engine::Stats {
    let running = spawn_engine(engine, |_m: Message| async { Outcome::Ack });
    tokio::time::sleep(Duration::from_millis(500)).await;
    running.shutdown().await
}

/// The URL of `queue` once the engine whose stats are `stats` has opened it (and written its
/// redrive policy).
async fn opened(
    client: &aws_sdk_sqs::Client,
    stats: &sqs_engine::StatsHandle,
    queue: &str,
) -> String {
    eventually(Duration::from_secs(10), "the queue opened", || {
        stats.snapshot().set_queue_attributes.ok == 1
    })
    .await;
    queue_url(client, queue).await
}

/// The seed's invoice: a handler that always asks to come back later, under
/// `max_attempts(3)` and `dead_letter("invoices-dead")`. It is received exactly three times,
/// then SQS moves it to the dead-letter queue, where an ordinary consumer reads it.
#[tokio::test]
async fn an_invoice_that_is_never_ready_is_received_three_times_then_dead_lettered() {
    let client = client().await;
    let queue = unique("invoices");
    let dead = format!("{queue}-dead");
    let receives: Arc<Mutex<Vec<u32>>> = Arc::default();
    let engine = declaring(&queue, 3, &dead)
        .await
        .create_if_missing(true)
        .build()
        .expect("valid settings");
    let stats = engine.stats();
    let seen = Arc::clone(&receives);
    let running = spawn_engine(engine, move |message: Message| {
        seen.lock().expect("lock").push(message.receive_count());
        async { Outcome::RetryAfter(RECHECK) }
    });
    // The queue exists once the engine has opened it.
    let url = opened(&client, &stats, &queue).await;
    let policy = attribute(&client, &url, QueueAttributeName::RedrivePolicy).await;
    assert!(policy.contains(&dead), "{policy}");
    assert!(policy.contains('3'), "{policy}");

    send(&client, &url, &["invoice-7".to_owned()]).await;
    eventually(Duration::from_secs(20), "three receives", || {
        receives.lock().expect("lock").len() >= 3
    })
    .await;
    // Long enough for a fourth receive, which SQS answers by moving the message.
    tokio::time::sleep(RECHECK * 4).await;
    let stats = running.shutdown().await;

    assert_eq!(*receives.lock().expect("lock"), [1, 2, 3]);
    assert_eq!(stats.at_last_receive, 1);
    assert_eq!(counts(&client, &url).await, (0, 0));
    assert_eq!(dead_letter_bodies(&client, &dead).await, ["invoice-7"]);
}

/// A drop on the last allowed receive returns the message so that SQS moves it; a drop before
/// the cap deletes it.
#[tokio::test]
async fn a_drop_at_the_cap_returns_the_message_for_the_dead_letter_queue() {
    let client = client().await;
    let queue = unique("drop-cap");
    let dead = format!("{queue}-dead");
    let engine = declaring(&queue, 2, &dead)
        .await
        .create_if_missing(true)
        .build()
        .expect("valid settings");
    let stats = engine.stats();
    let running = spawn_engine(engine, |message: Message| async move {
        match (message.body(), message.receive_count()) {
            // Dropped on its first receive, below the cap: deleted.
            ("early", _) => Outcome::Drop,
            // Retried once, then dropped on its second receive, the cap.
            ("capped", 1) => Outcome::Retry,
            _ => Outcome::Drop,
        }
    });
    let url = opened(&client, &stats, &queue).await;
    send(&client, &url, &["early".to_owned(), "capped".to_owned()]).await;
    eventually(Duration::from_secs(20), "both dropped", || {
        stats.snapshot().dropped.ok == 2
    })
    .await;
    // The next receive moves the returned message.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = running.shutdown().await;

    assert_eq!(
        stats.redrive_returns, 1,
        "only the drop at the cap was returned"
    );
    assert_eq!(stats.delete_entries, 1, "the early drop was deleted");
    assert_eq!(counts(&client, &url).await, (0, 0));
    assert_eq!(dead_letter_bodies(&client, &dead).await, ["capped"]);
}

async fn start_error(engine: Engine) -> Error {
    engine
        .run(|_m: Message| async { Outcome::Ack }, async {})
        .await
        .expect_err("the engine refuses to start")
}

#[tokio::test]
async fn a_redrive_policy_by_halves_is_refused_naming_the_missing_half() {
    let without_dead_letter = builder("orders")
        .await
        .max_attempts(3)
        .build()
        .expect_err("incomplete");
    assert!(matches!(
        without_dead_letter,
        Error::IncompleteRedrive {
            missing: "dead_letter(..)",
            ..
        }
    ));
    assert!(
        without_dead_letter
            .to_string()
            .contains("without dead_letter(..)")
    );

    let without_cap = builder("orders")
        .await
        .dead_letter("orders-dead")
        .build()
        .expect_err("incomplete");
    assert!(matches!(
        without_cap,
        Error::IncompleteRedrive {
            missing: "max_attempts(..)",
            ..
        }
    ));
    assert!(without_cap.to_string().contains("without max_attempts(..)"));
}

#[tokio::test]
async fn a_cap_outside_1_to_1000_is_refused() {
    for cap in [0, 1001] {
        let error = builder("orders")
            .await
            .max_attempts(cap)
            .dead_letter("orders-dead")
            .build()
            .expect_err("out of range");
        let text = error.to_string();
        assert!(matches!(error, Error::Config(_)), "{error:?}");
        assert!(
            text.contains("max_attempts") && text.contains("1..=1000"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_missing_dead_letter_queue_is_refused_at_startup() {
    let client = client().await;
    let queue = unique("no-dead");
    create_queue(&client, &queue, 30).await;
    let dead = format!("{queue}-missing");
    let engine = declaring(&queue, 3, &dead)
        .await
        .build()
        .expect("valid settings");
    let error = start_error(engine).await;
    assert!(
        matches!(&error, Error::DeadLetterQueueNotFound { dead_letter, .. } if *dead_letter == dead),
        "{error:?}"
    );
    assert!(error.to_string().contains(&dead), "{error}");
}

#[tokio::test]
async fn a_fifo_queue_with_a_standard_dead_letter_queue_is_refused() {
    let client = client().await;
    let queue = format!("{}.fifo", unique("fifo"));
    let dead = unique("standard-dead");
    client
        .create_queue()
        .queue_name(&queue)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .expect("CreateQueue");
    create_queue(&client, &dead, 30).await;
    let engine = declaring(&queue, 3, &dead)
        .await
        .build()
        .expect("valid settings");
    let error = start_error(engine).await;
    let text = error.to_string();
    assert!(matches!(error, Error::Misconfigured { .. }), "{error:?}");
    assert!(
        text.contains(&queue) && text.contains(&dead) && text.contains("FIFO"),
        "{text}"
    );
}

#[tokio::test]
async fn a_missing_queue_is_a_clear_error() {
    let queue = unique("absent");
    let engine = builder(&queue).await.build().expect("valid settings");
    let error = start_error(engine).await;
    assert!(
        matches!(&error, Error::QueueNotFound { queue: q } if *q == queue),
        "{error:?}"
    );
    assert!(error.to_string().contains(&queue));
}

/// A queue and its dead-letter queue made by the infrastructure, the queue's policy sending a
/// message on after `cap` receives; returns the queue's URL and the dead-letter queue's ARN.
async fn provisioned(
    client: &aws_sdk_sqs::Client,
    queue: &str,
    dead: &str,
    cap: u32,
) -> (String, String) {
    let dead_url = create_queue(client, dead, 30).await;
    let arn = attribute(client, &dead_url, QueueAttributeName::QueueArn).await;
    let url = create_queue(client, queue, 30).await;
    set_policy(client, &url, &arn, cap).await;
    (url, arn)
}

/// One attribute of a queue, which must have it.
async fn attribute(client: &aws_sdk_sqs::Client, url: &str, name: QueueAttributeName) -> String {
    client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(name.clone())
        .send()
        .await
        .expect("attributes")
        .attributes
        .and_then(|mut attributes| attributes.remove(&name))
        .unwrap_or_else(|| panic!("the queue has {name:?}"))
}

async fn set_policy(client: &aws_sdk_sqs::Client, url: &str, arn: &str, cap: u32) {
    client
        .set_queue_attributes()
        .queue_url(url)
        .attributes(
            QueueAttributeName::RedrivePolicy,
            format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":"{cap}"}}"#),
        )
        .send()
        .await
        .expect("SetQueueAttributes");
}

async fn policy_cap(client: &aws_sdk_sqs::Client, url: &str) -> String {
    let policy = attribute(client, url, QueueAttributeName::RedrivePolicy).await;
    let value: serde_json::Value = serde_json::from_str(&policy).expect("JSON");
    match &value["maxReceiveCount"] {
        serde_json::Value::String(cap) => cap.clone(),
        other => other.to_string(),
    }
}

/// The policy the infrastructure set is adopted when the code declares none: a drop at its cap
/// returns the message, SQS moves it to the dead-letter queue, and nothing is written.
#[tokio::test]
async fn a_policy_set_by_the_infrastructure_is_adopted_for_a_drop_at_its_cap() {
    let client = client().await;
    let queue = unique("adopted");
    let dead = format!("{queue}-dead");
    let (url, _) = provisioned(&client, &queue, &dead, 2).await;
    send(&client, &url, &["capped".to_owned()]).await;
    let engine = builder(&queue).await.build().expect("valid settings");
    let stats = engine.stats();
    let running = spawn_engine(engine, |message: Message| async move {
        if message.receive_count() == 1 {
            Outcome::Retry
        } else {
            Outcome::Drop
        }
    });
    eventually(Duration::from_secs(20), "dropped at the cap", || {
        stats.snapshot().dropped.ok == 1
    })
    .await;
    // The next receive moves the returned message.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = running.shutdown().await;
    assert_eq!(stats.redrive_returns, 1, "returned, not deleted");
    assert_eq!(stats.delete_entries, 0);
    assert_eq!(stats.set_queue_attributes.total(), 0, "nothing written");
    assert_eq!(dead_letter_bodies(&client, &dead).await, ["capped"]);
}

/// A declared policy the queue already has is not written again.
#[tokio::test]
async fn a_declared_policy_the_queue_already_has_is_not_written_again() {
    let client = client().await;
    let queue = unique("declared-same");
    let dead = format!("{queue}-dead");
    let (url, _) = provisioned(&client, &queue, &dead, 3).await;
    let engine = declaring(&queue, 3, &dead)
        .await
        .build()
        .expect("valid settings");
    let stats = opened_briefly(engine).await;
    assert_eq!(stats.set_queue_attributes.total(), 0, "nothing written");
    assert_eq!(policy_cap(&client, &url).await, "3");
}

/// A declared policy that differs from the queue's is written by default, and refused with
/// `RedriveWrite::Never`, which leaves the queue's own alone.
#[tokio::test]
async fn a_declared_policy_that_differs_is_written_or_with_never_refused() {
    let client = client().await;
    let queue = unique("declared-differs");
    let dead = format!("{queue}-dead");
    let (url, _) = provisioned(&client, &queue, &dead, 5).await;

    let refused = start_error(
        declaring(&queue, 2, &dead)
            .await
            .redrive_write(RedriveWrite::Never)
            .build()
            .expect("valid settings"),
    )
    .await;
    assert!(
        matches!(&refused, Error::Misconfigured { reason, .. } if reason.contains("maxReceiveCount 5") && reason.contains("maxReceiveCount 2")),
        "{refused}"
    );
    assert_eq!(policy_cap(&client, &url).await, "5", "left alone");

    let engine = declaring(&queue, 2, &dead)
        .await
        .build()
        .expect("valid settings");
    let stats = opened_briefly(engine).await;
    assert_eq!(stats.set_queue_attributes.ok, 1, "written");
    assert_eq!(policy_cap(&client, &url).await, "2");
}
