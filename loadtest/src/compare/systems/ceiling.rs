//! The raw ceiling: `ReceiveMessage` of ten and one `DeleteMessageBatch` of what came, in
//! tight loops, with no handler. Nothing a consumer does per message can be cheaper than
//! this, so it bounds what any system can reach on a target.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;
use tokio::task::JoinSet;

use super::calls::{CallCounter, Calls};
use crate::behaviour::parse_body;
use crate::compare::job::Job;
use crate::compare::probe::Probe;

/// Runs the loops until the probe's target is reached. Every message is deleted, whatever
/// the scenario's handler would have decided: the ceiling has no handler.
///
/// # Errors
///
/// Never: failed calls are counted and the loop goes on.
pub(crate) async fn run(job: &Job, client: Client, probe: Arc<Probe>) -> Result<Calls> {
    let calls = Arc::new(CallCounter::default());
    let mut loops = JoinSet::new();
    for _ in 0..job.ceiling_loops.max(1) {
        loops.spawn(one_loop(
            client.clone(),
            job.queue_url.clone(),
            Arc::clone(&probe),
            Arc::clone(&calls),
        ));
    }
    probe.done.cancelled().await;
    loops.abort_all();
    Ok(calls.snapshot())
}

/// One receive-and-delete loop.
async fn one_loop(client: Client, queue_url: String, probe: Arc<Probe>, calls: Arc<CallCounter>) {
    while !probe.done.is_cancelled() {
        calls.add("ReceiveMessage");
        let Ok(output) = client
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(20)
            .send()
            .await
        else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let messages = output.messages.unwrap_or_default();
        if messages.is_empty() {
            continue;
        }
        let entries = messages
            .iter()
            .enumerate()
            .filter_map(|(at, message)| {
                probe.delivered(parse_body(message.body().unwrap_or_default()).1);
                DeleteMessageBatchRequestEntry::builder()
                    .id(at.to_string())
                    .receipt_handle(message.receipt_handle().unwrap_or_default())
                    .build()
                    .ok()
            })
            .collect::<Vec<_>>();
        let returned = Instant::now();
        calls.add("DeleteMessageBatch");
        if let Ok(output) = client
            .delete_message_batch()
            .queue_url(&queue_url)
            .set_entries(Some(entries))
            .send()
            .await
        {
            let latency = returned.elapsed();
            for _ in &output.successful {
                probe.settlement.record(latency);
            }
            probe.finished(output.successful.len() as u64);
        }
    }
}
