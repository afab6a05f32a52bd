//! sqs-engine through its native API: `Engine::run` with a handler doing the scenario's
//! work. The engine counts its own calls ([`sqs_engine::Stats`]); its settlement latency
//! comes from its `sqs_engine_settlement_latency_seconds` histogram, and its finished messages
//! from its `sqs_engine_settlements_total` counter, both through the child's recorder
//! ([`crate::compare::recorder`]). On a FIFO queue (a name ending in `.fifo`) the engine
//! keeps each group's order by itself, with its defaults.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use aws_config::SdkConfig;
use sqs_engine::{Engine, Message, Outcome, Stats};

use super::calls::Calls;
use crate::behaviour::{Verdict, parse_body, parse_group_seq};
use crate::compare::job::Job;
use crate::compare::probe::Probe;

/// Runs the engine until the probe's target is reached (messages acked or dropped, as the
/// engine's counters say SQS answered), then shuts it down.
///
/// # Errors
///
/// When the engine cannot be built or cannot open the queue.
pub(crate) async fn run(job: &Job, config: &SdkConfig, probe: Arc<Probe>) -> Result<Calls> {
    let mut builder = Engine::builder()
        .sdk_config(config)
        .queue(job.queue_url.clone())
        .workers(job.workers);
    if let Some(receivers) = job.receivers {
        builder = builder.receivers(receivers);
    }
    if let Some(secs) = job.visibility_secs {
        builder = builder.visibility_timeout(Duration::from_secs(secs));
    }
    let engine = builder.build().context("configuring the engine")?;
    let behaviour = job.behaviour;
    let handler = {
        let probe = Arc::clone(&probe);
        move |message: Message| {
            let (key, sent) = parse_body(message.body());
            probe.delivered(sent);
            let decision = behaviour.decide(key, message.receive_count());
            let order = parse_group_seq(message.body());
            if let Some((group, seq)) = order {
                probe.order.started(group, seq);
            }
            let probe = Arc::clone(&probe);
            async move {
                if !decision.wait.is_zero() {
                    tokio::time::sleep(decision.wait).await;
                }
                if let Some((group, seq)) = order {
                    probe.order.ended(group, seq, decision.verdict.is_final());
                }
                match decision.verdict {
                    Verdict::Ack => Outcome::Ack,
                    Verdict::Drop => Outcome::Drop,
                    Verdict::RetryAfter(delay) => Outcome::RetryAfter(delay),
                }
            }
        }
    };
    let done = probe.done.clone();
    let stats_at_end = engine
        .run(handler, async move { done.cancelled().await })
        .await
        .context("running the engine")?;
    Ok(calls_of(&stats_at_end))
}

/// The calls of the engine's counters, by action.
fn calls_of(stats: &Stats) -> Calls {
    [
        (
            "ReceiveMessage",
            stats.receive_message.total() + stats.abandoned_receives,
        ),
        ("DeleteMessageBatch", stats.delete_message_batch.total()),
        (
            "ChangeMessageVisibilityBatch",
            stats.change_message_visibility_batch.total(),
        ),
        ("GetQueueUrl", stats.get_queue_url.total()),
        ("GetQueueAttributes", stats.get_queue_attributes.total()),
        ("SetQueueAttributes", stats.set_queue_attributes.total()),
        ("CreateQueue", stats.create_queue.total()),
    ]
    .into_iter()
    .filter(|(_, count)| *count > 0)
    .map(|(action, count)| (action.to_owned(), count))
    .collect()
}
