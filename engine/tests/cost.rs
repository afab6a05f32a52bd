//! The cost of consuming: SQS calls per message at full load, on LocalStack, counted by the
//! engine and checked against the requests that reached LocalStack, counted on the wire by the
//! test proxy in front of it (LocalStack's own log holds every client's calls, and a long poll
//! of an earlier test still open when this one starts would count there).

use sqs_engine_test_support as support;

use std::time::Duration;

use support::proxy::Proxy;
use support::*;

const MESSAGES: usize = 10_000;

/// Counts the requests of each action in LocalStack's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_acks_cost_at_most_0_21_calls_per_message() {
    let client = client().await;
    let name = unique("cost");
    let url = create_queue(&client, &name, 60).await;
    let bodies: Vec<String> = (0..MESSAGES).map(|i| format!("{i:0>200}")).collect();
    let senders: Vec<_> = bodies
        .chunks(MESSAGES / 8)
        .map(|chunk| {
            let client = client.clone();
            let url = url.clone();
            let chunk = chunk.to_vec();
            tokio::spawn(async move { send(&client, &url, &chunk).await })
        })
        .collect();
    for sender in senders {
        sender.await.expect("send task");
    }

    let proxy = Proxy::start().await;
    let engine = sqs_engine::Engine::builder()
        .sdk_config(&sdk_config_at(&proxy.url()).await)
        .queue(name.as_str())
        .wait_time(Duration::from_secs(1))
        .build()
        .expect("valid settings");
    let (stats, _) = ack_until_handled(engine, MESSAGES, Duration::from_secs(300)).await;
    // A long poll abandoned at shutdown still reaches LocalStack: let it answer.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let wire = proxy.counts();

    let receives = stats.receive_message.total() + stats.abandoned_receives;
    let deletes = stats.delete_message_batch.total();
    let per_message = (receives + deletes) as f64 / MESSAGES as f64;
    println!(
        "receives {receives}, deletes {deletes}, calls per message {per_message:.4}, {stats:?}"
    );
    assert_eq!(stats.acked.ok, MESSAGES as u64);
    assert!(
        per_message <= 0.21,
        "{per_message:.4} calls per message (receives {receives}, deletes {deletes})"
    );
    assert_eq!(
        wire.injected() + wire.refused(),
        0,
        "the proxy only forwards"
    );
    // Every receive reached the proxy on its way to LocalStack. Those the engine abandoned at
    // shutdown (counted by it, and by SQS as requests) were answered too when LocalStack's
    // answer beat the closing of their connection, which is a race: each may count or not.
    assert_eq!(
        proxy.attempt_ids().len() as u64,
        receives,
        "the receives the engine counted went out"
    );
    let answered = wire.action("ReceiveMessage").forwarded;
    assert!(
        (receives - stats.abandoned_receives..=receives).contains(&answered),
        "LocalStack answered every receive the engine did not abandon: {answered} answered of \
         {receives}, {} abandoned",
        stats.abandoned_receives
    );
    assert_eq!(
        wire.action("DeleteMessageBatch").forwarded,
        deletes,
        "LocalStack got the deletes the engine counted"
    );
    for action in [
        "DeleteMessage",
        "ChangeMessageVisibility",
        "ChangeMessageVisibilityBatch",
    ] {
        assert_eq!(wire.action(action).forwarded, 0, "no {action} calls");
    }
    assert_eq!(counts(&client, &url).await, (0, 0));
}
