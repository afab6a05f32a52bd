//! The naive loop: what a user writes by hand with `aws-sdk-sqs`. `workers` loops, each
//! receiving up to ten messages and handling them one after another, deleting each with its
//! own `DeleteMessage` (or `ChangeMessageVisibility` for a retry_after). No heartbeat.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use tokio::task::JoinSet;

use super::calls::{CallCounter, Calls};
use crate::behaviour::{Verdict, parse_body};
use crate::compare::job::Job;
use crate::compare::probe::Probe;

/// Runs the naive loops until the probe's target is reached.
///
/// # Errors
///
/// Never: failed calls are counted and the loop goes on.
pub(crate) async fn run(job: &Job, client: Client, probe: Arc<Probe>) -> Result<Calls> {
    let calls = Arc::new(CallCounter::default());
    let mut loops = JoinSet::new();
    for _ in 0..job.workers.max(1) {
        loops.spawn(one_loop(
            client.clone(),
            job.clone(),
            Arc::clone(&probe),
            Arc::clone(&calls),
        ));
    }
    probe.done.cancelled().await;
    loops.abort_all();
    Ok(calls.snapshot())
}

/// One receive loop.
async fn one_loop(client: Client, job: Job, probe: Arc<Probe>, calls: Arc<CallCounter>) {
    while !probe.done.is_cancelled() {
        calls.add("ReceiveMessage");
        let mut receive = client
            .receive_message()
            .queue_url(&job.queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(20)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount);
        if let Some(secs) = job.visibility_secs {
            receive = receive.visibility_timeout(i32::try_from(secs).unwrap_or(i32::MAX));
        }
        let Ok(output) = receive.send().await else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        for message in output.messages.unwrap_or_default() {
            let (key, sent) = parse_body(message.body().unwrap_or_default());
            probe.delivered(sent);
            let receive_count = message
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|count| count.parse().ok())
                .unwrap_or(1);
            let decision = job.behaviour.decide(key, receive_count);
            if !decision.wait.is_zero() {
                tokio::time::sleep(decision.wait).await;
            }
            let handle = message.receipt_handle().unwrap_or_default();
            let returned = Instant::now();
            let settled = match decision.verdict {
                Verdict::Ack | Verdict::Drop => {
                    calls.add("DeleteMessage");
                    client
                        .delete_message()
                        .queue_url(&job.queue_url)
                        .receipt_handle(handle)
                        .send()
                        .await
                        .is_ok()
                }
                Verdict::RetryAfter(delay) => {
                    calls.add("ChangeMessageVisibility");
                    client
                        .change_message_visibility()
                        .queue_url(&job.queue_url)
                        .receipt_handle(handle)
                        .visibility_timeout(
                            i32::try_from(delay.as_secs().max(1)).unwrap_or(i32::MAX),
                        )
                        .send()
                        .await
                        .is_ok()
                }
            };
            if settled {
                probe.settlement.record(returned.elapsed());
                if decision.verdict.is_final() {
                    probe.finished(1);
                }
            }
        }
    }
}
