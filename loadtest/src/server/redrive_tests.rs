//! The embedded server's redrive policy, driven by a real `aws_sdk_sqs::Client` over loopback
//! HTTP: a message received `maxReceiveCount` times moves to the dead-letter queue on the next
//! receive, and a policy whose dead-letter queue is missing or of the other kind is refused.

use aws_sdk_sqs::types::QueueAttributeName;

use super::tests::{
    assert_service_error, attributes, create, receive, receive_count, send, start,
    visible_and_in_flight,
};

/// The ARN of queue `url`.
async fn arn(client: &aws_sdk_sqs::Client, url: &str) -> String {
    attributes(client, url).await[&QueueAttributeName::QueueArn].clone()
}

/// A redrive policy to `dead_letter_arn` after `max_receive_count` receives.
fn policy(dead_letter_arn: &str, max_receive_count: u32) -> String {
    format!(
        r#"{{"deadLetterTargetArn":"{dead_letter_arn}","maxReceiveCount":{max_receive_count}}}"#
    )
}

#[tokio::test]
async fn a_message_received_max_receive_count_times_moves_to_the_dead_letter_queue() {
    let (_server, client) = start().await;
    let dead_letter = create(&client, "orders-dlq", &[]).await;
    let policy = policy(&arn(&client, &dead_letter).await, 2);
    let url = create(
        &client,
        "orders",
        &[(QueueAttributeName::RedrivePolicy, policy.as_str())],
    )
    .await;
    send(&client, &url, "poison").await;
    send(&client, &url, "fine").await;

    // Two receives each, handed back at once (visibility 0).
    for expected in 1..=2 {
        let received = receive(&client, &url, 10, 0, Some(0)).await;
        assert_eq!(received.len(), 2, "receive {expected}");
        assert!(received.iter().all(|m| receive_count(m) == expected));
    }
    // The third receive comes upon both at their cap: they move instead of being handed out.
    assert!(receive(&client, &url, 10, 0, Some(0)).await.is_empty());
    assert_eq!(visible_and_in_flight(&client, &url).await, ["0", "0"]);
    assert_eq!(
        visible_and_in_flight(&client, &dead_letter).await,
        ["2", "0"]
    );

    // In the dead-letter queue, visible at once, in send order, their receive counts kept.
    let moved = receive(&client, &dead_letter, 10, 0, None).await;
    let bodies: Vec<&str> = moved.iter().filter_map(|m| m.body()).collect();
    assert_eq!(bodies, ["poison", "fine"]);
    assert!(moved.iter().all(|m| receive_count(m) == 3));
}

#[tokio::test]
async fn a_message_deleted_before_its_cap_never_moves() {
    let (_server, client) = start().await;
    let dead_letter = create(&client, "jobs-dlq", &[]).await;
    let policy = policy(&arn(&client, &dead_letter).await, 1);
    let url = create(&client, "jobs", &[]).await;
    client
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::RedrivePolicy, policy)
        .send()
        .await
        .expect("SetQueueAttributes takes the policy");
    send(&client, &url, "handled").await;
    let received = receive(&client, &url, 1, 0, None).await;
    client
        .delete_message()
        .queue_url(&url)
        .receipt_handle(received[0].receipt_handle().expect("a receipt handle"))
        .send()
        .await
        .expect("DeleteMessage succeeds");
    assert!(receive(&client, &url, 10, 0, None).await.is_empty());
    assert_eq!(
        visible_and_in_flight(&client, &dead_letter).await,
        ["0", "0"]
    );

    // Removing the policy (an empty value) stops the moves.
    client
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::RedrivePolicy, "")
        .send()
        .await
        .expect("SetQueueAttributes removes the policy");
    send(&client, &url, "again").await;
    for expected in 1..=3 {
        let received = receive(&client, &url, 1, 0, Some(0)).await;
        assert_eq!(received.len(), 1, "receive {expected}");
        assert_eq!(receive_count(&received[0]), expected);
    }
    assert_eq!(
        visible_and_in_flight(&client, &dead_letter).await,
        ["0", "0"]
    );
}

#[tokio::test]
async fn a_policy_naming_no_queue_itself_or_the_other_kind_is_refused() {
    let (_server, client) = start().await;
    let standard = create(&client, "standard-dlq", &[]).await;
    let fifo = create(
        &client,
        "fifo-dlq.fifo",
        &[(QueueAttributeName::FifoQueue, "true")],
    )
    .await;
    let url = create(&client, "source", &[]).await;
    let missing = "arn:aws:sqs:us-east-1:000000000000:nowhere".to_owned();
    for value in [
        policy(&missing, 3),
        policy(&arn(&client, &url).await, 3),
        policy(&arn(&client, &fifo).await, 3),
        policy(&arn(&client, &standard).await, 0),
        r#"{"maxReceiveCount":3}"#.to_owned(),
    ] {
        let error = client
            .set_queue_attributes()
            .queue_url(&url)
            .attributes(QueueAttributeName::RedrivePolicy, &value)
            .send()
            .await
            .expect_err(&value);
        assert_service_error(&error, |e| e.is_invalid_attribute_value());
    }
    let error = client
        .create_queue()
        .queue_name("other")
        .attributes(QueueAttributeName::RedrivePolicy, policy(&missing, 3))
        .send()
        .await
        .expect_err("CreateQueue refuses a policy naming no queue");
    assert_service_error(&error, |e| e.is_invalid_attribute_value());
    assert!(
        !attributes(&client, &url)
            .await
            .contains_key(&QueueAttributeName::RedrivePolicy),
        "nothing refused was stored"
    );
}
