//! The double's own unit tests.

use std::time::Duration;

use super::{InProcessSqs, QueueCounts};
use crate::api::{EntryResult, ReceiveRequest, ReceivedMessage, SendEntry, SqsApi};

fn request(url: &str) -> ReceiveRequest<'_> {
    ReceiveRequest {
        queue_url: url,
        max_messages: 10,
        wait_time: Duration::ZERO,
        visibility_timeout: 0,
        attempt_id: None,
        system_attributes: crate::SystemAttributes::All.names(),
    }
}

async fn url(sqs: &InProcessSqs, name: &str) -> String {
    sqs.queue_url(name).await.expect("queue url")
}

/// An in-process SQS holding one message, `a1`, on `orders.fifo`, and that queue's URL.
async fn one_fifo_message() -> (InProcessSqs, String) {
    let sqs = InProcessSqs::new();
    sqs.send("orders.fifo", "a1").expect("sent");
    let url = url(&sqs, "orders.fifo").await;
    (sqs, url)
}

/// A receive of `url` under the attempt id `attempt-1`, hiding what it gets for 30 s.
fn first_attempt(url: &str) -> ReceiveRequest<'_> {
    ReceiveRequest {
        visibility_timeout: 30,
        attempt_id: Some("attempt-1"),
        ..request(url)
    }
}

#[tokio::test(start_paused = true)]
async fn a_delayed_retry_comes_back_after_its_delay_on_tokios_clock() {
    let sqs = InProcessSqs::new();
    sqs.send("orders", "one").expect("sent");
    let url = url(&sqs, "orders").await;
    let first = sqs.receive(&request(&url)).await.expect("receive");
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].attributes["ApproximateReceiveCount"], "1");
    let handle = first[0].receipt_handle.as_str();
    let answer = sqs
        .change_message_visibility_batch(&url, &[(handle, 60)])
        .await
        .expect("change");
    assert_eq!(answer, vec![EntryResult::Ok]);

    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(
        sqs.receive(&request(&url))
            .await
            .expect("receive")
            .is_empty()
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    let again = sqs.receive(&request(&url)).await.expect("receive");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attributes["ApproximateReceiveCount"], "2");

    // The first handle is stale now: answered with success, and deletes nothing.
    let stale = sqs
        .delete_message_batch(&url, &[handle])
        .await
        .expect("delete");
    assert_eq!(stale, vec![EntryResult::Ok]);
    assert_eq!(sqs.counts("orders").in_flight, 1);
    let current = again[0].receipt_handle.as_str();
    sqs.delete_message_batch(&url, &[current])
        .await
        .expect("delete");
    assert_eq!(sqs.counts("orders"), QueueCounts::default());
}

#[tokio::test(start_paused = true)]
async fn a_visibility_past_twelve_hours_from_the_receive_is_refused() {
    let sqs = InProcessSqs::new();
    sqs.send("orders", "one").expect("sent");
    let url = url(&sqs, "orders").await;
    let received = sqs.receive(&request(&url)).await.expect("receive");
    let handle = received[0].receipt_handle.as_str();
    sqs.change_message_visibility_batch(&url, &[(handle, 7_200)])
        .await
        .expect("change");
    tokio::time::advance(Duration::from_secs(3_600)).await;
    let answer = sqs
        .change_message_visibility_batch(&url, &[(handle, 43_200)])
        .await
        .expect("change");
    assert!(
        matches!(&answer[0], EntryResult::Failed(f) if f.code == "InvalidParameterValue"),
        "{answer:?}"
    );
    let within = sqs
        .change_message_visibility_batch(&url, &[(handle, 39_600)])
        .await
        .expect("change");
    assert_eq!(within, vec![EntryResult::Ok]);
}

#[tokio::test(start_paused = true)]
async fn a_fifo_group_with_a_message_in_flight_hands_out_nothing_more() {
    let sqs = InProcessSqs::new();
    sqs.send("orders.fifo", "a1").expect("sent");
    sqs.send("orders.fifo", "a2").expect("sent");
    let url = url(&sqs, "orders.fifo").await;
    let one = ReceiveRequest {
        max_messages: 1,
        ..request(&url)
    };
    let first = sqs.receive(&one).await.expect("receive");
    assert_eq!(first[0].body, "a1");
    assert!(sqs.receive(&one).await.expect("receive").is_empty());
    let handle = first[0].receipt_handle.as_str();
    sqs.delete_message_batch(&url, &[handle])
        .await
        .expect("delete");
    assert_eq!(sqs.receive(&one).await.expect("receive")[0].body, "a2");
}

#[tokio::test(start_paused = true)]
async fn a_fifo_receive_retried_with_its_attempt_id_gets_the_same_messages() {
    let sqs = InProcessSqs::new();
    for body in ["a1", "a2", "a3"] {
        sqs.send("orders.fifo", body).expect("sent");
    }
    let url = url(&sqs, "orders.fifo").await;
    let attempt = ReceiveRequest {
        max_messages: 2,
        attempt_id: Some("attempt-1"),
        ..request(&url)
    };
    // The answer of the first attempt is lost on the way: the retry gets it again.
    let lost = sqs.receive(&attempt).await.expect("receive");
    assert_eq!(lost.len(), 2);
    let again = sqs.receive(&attempt).await.expect("receive");
    let handles = |messages: &[ReceivedMessage]| -> Vec<String> {
        messages.iter().map(|m| m.receipt_handle.clone()).collect()
    };
    assert_eq!(
        handles(&again),
        handles(&lost),
        "the same messages and receipt handles"
    );
    assert_eq!(again[0].attributes["ApproximateReceiveCount"], "1");
    // Once one of them is deleted, the id no longer replays.
    let handle = again[0].receipt_handle.as_str();
    sqs.delete_message_batch(&url, &[handle])
        .await
        .expect("delete");
    assert!(
        sqs.receive(&attempt).await.expect("receive").is_empty(),
        "a2 is still in flight, so its group hands out nothing"
    );
}

// Paused clock: the visibility timeout passes in no time.
#[tokio::test(start_paused = true)]
async fn a_fifo_receive_retried_with_its_attempt_id_restarts_the_visibility_timeout() {
    let (sqs, url) = one_fifo_message().await;
    let attempt = first_attempt(&url);
    assert_eq!(sqs.receive(&attempt).await.expect("receive").len(), 1);
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(sqs.receive(&attempt).await.expect("retry").len(), 1);
    // 30 s after the first call, 10 s after the retry: SQS counts the 30 s from the retry.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        sqs.counts("orders.fifo").in_flight,
        1,
        "hidden until 30 s after the retry"
    );
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(sqs.counts("orders.fifo").visible, 1);
}

// Paused clock: the visibility timeouts pass in no time.
#[tokio::test(start_paused = true)]
async fn a_long_poll_gets_a_message_once_the_visibility_a_retried_receive_restarted_ends() {
    let (sqs, url) = one_fifo_message().await;
    let attempt = first_attempt(&url);
    assert_eq!(sqs.receive(&attempt).await.expect("receive").len(), 1);
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(sqs.receive(&attempt).await.expect("retry").len(), 1);
    let poll = ReceiveRequest {
        wait_time: Duration::from_secs(20),
        ..request(&url)
    };
    let again = tokio::time::timeout(Duration::from_secs(60), sqs.receive(&poll))
        .await
        .expect("the long poll is woken when a1 is visible again, 30 s after the retry")
        .expect("receive");
    assert_eq!(again[0].body, "a1");
}

// Paused clock: the visibility timeouts pass in no time.
#[tokio::test(start_paused = true)]
async fn a_fifo_receive_retried_after_its_message_was_changed_does_not_get_it_again() {
    let (sqs, url) = one_fifo_message().await;
    let attempt = first_attempt(&url);
    let first = sqs.receive(&attempt).await.expect("receive");
    let handle = first[0].receipt_handle.as_str();
    sqs.change_message_visibility_batch(&url, &[(handle, 300)])
        .await
        .expect("changed");
    assert!(
        sqs.receive(&attempt).await.expect("retry").is_empty(),
        "a message whose visibility was changed is not handed out again by the attempt"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        sqs.counts("orders.fifo").in_flight,
        1,
        "the retry left the visibility the change set"
    );
}

#[tokio::test(start_paused = true)]
async fn a_spent_message_moves_to_the_dead_letter_queue_and_bad_input_is_refused() {
    let sqs = InProcessSqs::new();
    let dead = url(&sqs, "orders-dead").await;
    let url = url(&sqs, "orders").await;
    let arn = sqs
        .queue_attributes(&dead)
        .await
        .expect("attributes")
        .arn
        .expect("arn");
    let policy = format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":"2"}}"#);
    sqs.set_queue_attributes(&url, &[("RedrivePolicy", policy)])
        .await
        .expect("redrive");
    sqs.send("orders", "spent").expect("sent");
    for _ in 0..2 {
        let received = sqs.receive(&request(&url)).await.expect("receive");
        let handle = received[0].receipt_handle.as_str();
        sqs.change_message_visibility_batch(&url, &[(handle, 0)])
            .await
            .expect("change");
    }
    assert!(
        sqs.receive(&request(&url))
            .await
            .expect("receive")
            .is_empty()
    );
    assert_eq!(sqs.bodies("orders-dead"), vec!["spent".to_owned()]);
    let arrived: Vec<String> = sqs
        .sent("orders-dead")
        .into_iter()
        .map(|sent| sent.body)
        .collect();
    assert_eq!(
        arrived,
        ["spent"],
        "the move is in the dead-letter queue's log"
    );

    let empty = sqs.send("orders", "").expect_err("an empty body");
    assert_eq!(
        empty.code.as_deref(),
        Some("MissingParameter"),
        "as LocalStack answers"
    );
    assert!(
        sqs.send("orders", "\u{1}").is_err(),
        "a character SQS refuses"
    );
    assert!(
        sqs.send("o".repeat(81).as_str(), "x").is_err(),
        "a name too long"
    );
    let too_many = vec![SendEntry::default(); 11];
    assert!(sqs.send_message_batch(&url, &too_many).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn a_receive_returns_only_the_system_attributes_it_asked_for() {
    let sqs = InProcessSqs::new();
    sqs.send("orders", "a").expect("sent");
    sqs.send("orders", "b").expect("sent");
    let url = url(&sqs, "orders").await;
    let used = ReceiveRequest {
        max_messages: 1,
        system_attributes: crate::SystemAttributes::Used.names(),
        ..request(&url)
    };
    let first = sqs.receive(&used).await.expect("receive");
    let mut names: Vec<&str> = first[0].attributes.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["ApproximateReceiveCount", "SentTimestamp"]);
    let all = sqs.receive(&request(&url)).await.expect("receive");
    assert!(all[0].attributes.contains_key("SenderId"));
    assert!(
        all[0]
            .attributes
            .contains_key("ApproximateFirstReceiveTimestamp")
    );
}

// On a paused clock: the visibility deadlines are on tokio's clock.
#[tokio::test(start_paused = true)]
async fn a_duplicate_delivery_gives_a_second_handle_and_either_deletes_the_message() {
    let sqs = InProcessSqs::journaled();
    sqs.duplicate_deliveries(1.0, 7);
    sqs.send("orders", "one").expect("sent");
    let url = url(&sqs, "orders").await;
    let first = sqs.receive(&request(&url)).await.expect("receive");
    assert_eq!(first.len(), 1, "nothing was in flight to hand out again");
    let again = sqs.receive(&request(&url)).await.expect("receive");
    assert_eq!(again.len(), 1, "the message in flight is handed out again");
    assert_eq!(again[0].message_id, first[0].message_id);
    assert_ne!(again[0].receipt_handle, first[0].receipt_handle);
    assert_eq!(again[0].attributes["ApproximateReceiveCount"], "2");
    assert!(
        sqs.journal().iter().any(|applied| matches!(
            &applied.change,
            super::Change::Received { duplicate: true, receipt_handle, .. }
                if *receipt_handle == again[0].receipt_handle
        )),
        "the journal notes the duplicate"
    );
    let mut held = sqs.in_flight_receipts("orders");
    held.sort();
    let mut both = vec![
        first[0].receipt_handle.clone(),
        again[0].receipt_handle.clone(),
    ];
    both.sort();
    assert_eq!(held, both);

    // The first handle still names the message: it extends it, and deletes it.
    let first_handle = first[0].receipt_handle.as_str();
    let extended = sqs
        .change_message_visibility_batch(&url, &[(first_handle, 60)])
        .await
        .expect("change");
    assert_eq!(extended, vec![EntryResult::Ok]);
    sqs.delete_message_batch(&url, &[first_handle])
        .await
        .expect("delete");
    assert_eq!(sqs.counts("orders"), QueueCounts::default());
    // The second handle's delete is answered with success and deletes nothing more.
    let late = sqs
        .delete_message_batch(&url, &[again[0].receipt_handle.as_str()])
        .await
        .expect("delete");
    assert_eq!(late, vec![EntryResult::Ok]);
}

#[tokio::test(start_paused = true)]
async fn a_fifo_queue_never_hands_a_message_out_twice() {
    let sqs = InProcessSqs::new();
    sqs.duplicate_deliveries(1.0, 7);
    sqs.send("orders.fifo", "one").expect("sent");
    let url = url(&sqs, "orders.fifo").await;
    assert_eq!(sqs.receive(&request(&url)).await.expect("receive").len(), 1);
    assert!(
        sqs.receive(&request(&url))
            .await
            .expect("receive")
            .is_empty()
    );
}

// On a paused clock: the long poll waits with no timer.
#[tokio::test(start_paused = true)]
async fn a_deleted_queue_refuses_every_call_and_ends_a_waiting_long_poll() {
    let sqs = InProcessSqs::journaled();
    sqs.send("orders", "one").expect("sent");
    let url = url(&sqs, "orders").await;
    sqs.receive(&request(&url)).await.expect("receive");
    let waiting = {
        let sqs = sqs.clone();
        let url = url.clone();
        tokio::spawn(async move {
            let mut polling = request(&url);
            polling.wait_time = Duration::from_secs(20);
            sqs.receive(&polling).await
        })
    };
    tokio::task::yield_now().await;
    sqs.delete_queue("orders");
    let error = waiting
        .await
        .expect("the poll's task")
        .expect_err("the queue is gone");
    assert_eq!(error.kind, crate::CallErrorKind::QueueNotFound);
    assert_eq!(
        error.code.as_deref(),
        Some("AWS.SimpleQueueService.NonExistentQueue")
    );
    for refused in [
        sqs.delete_message_batch(&url, &["m-1:0:1"]).await.err(),
        sqs.change_message_visibility_batch(&url, &[("m-1:0:1", 0)])
            .await
            .err(),
        sqs.queue_url("orders").await.err(),
        sqs.create_queue("orders", &[]).await.err(),
        sqs.send("orders", "two").err(),
    ] {
        let error = refused.expect("refused");
        assert_eq!(error.kind, crate::CallErrorKind::QueueNotFound, "{error}");
    }
    assert!(
        sqs.journal()
            .iter()
            .any(|applied| applied.change == super::Change::QueueDeleted),
        "the message held is noted gone with its queue"
    );
}
