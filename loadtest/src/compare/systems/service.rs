// The comparison's framework service, `include!`d into one module per broker after that
// module's `use <broker>::prelude::*;` and its `SYSTEM` name (see `framework.rs`): one
// `#[subscriber]` doing the scenario's work, `workers` deliveries at once (on a FIFO queue,
// keyed workers, `workers_by_key(n)`, where the broker's `KEYED_ON_FIFO` says its group order
// needs them), started with `RustStream::start` and stopped with `RunningApp::shutdown`. The
// code is the same on both brokers but for that setting, as a service moving from one to the
// other would be.
// (No inner doc comment: this file is `include!`d.)

use std::num::NonZeroUsize;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use aws_config::SdkConfig;

use super::super::calls::Calls;
use crate::behaviour::{Behaviour, Verdict, parse_body, parse_group_seq};
use crate::compare::job::Job;
use crate::compare::probe::Probe;

/// How long the service's graceful shutdown may take.
const SHUTDOWN_WITHIN: Duration = Duration::from_secs(30);

/// What the handler needs: the subscriber is a plain function, so it reaches the run's probe
/// and behaviour through this (one run per child process).
static RUN: OnceLock<(Arc<Probe>, Behaviour)> = OnceLock::new();

/// A message body as SQS delivered it, read without a codec.
#[derive(Deserialized)]
struct Body<'a>(&'a [u8]);

/// The subscriber: the scenario's decision for the message, then its outcome, with a
/// continuation that records the settlement.
#[subscriber(SqsQueue)]
async fn handle(body: &Body<'_>, cx: &mut Context<'_>) -> HandlerOutcome {
    let Some((probe, behaviour)) = RUN.get() else {
        return HandlerOutcome::retry();
    };
    let text = std::str::from_utf8(body.0).unwrap_or_default();
    let (key, sent) = parse_body(text);
    probe.delivered(sent);
    let order = parse_group_seq(text);
    if let Some((group, seq)) = order {
        probe.order.started(group, seq);
    }
    let receive_count = cx
        .headers()
        .get_str(RECEIVE_COUNT_HEADER)
        .and_then(|count| count.parse().ok())
        .unwrap_or(1);
    let decision = behaviour.decide(key, receive_count);
    if !decision.wait.is_zero() {
        tokio::time::sleep(decision.wait).await;
    }
    if let Some((group, seq)) = order {
        probe
            .order
            .ended(group, seq, decision.verdict.is_final());
    }
    let outcome = match decision.verdict {
        Verdict::Ack => HandlerOutcome::ack(),
        Verdict::Drop => HandlerOutcome::drop(),
        Verdict::RetryAfter(delay) => HandlerOutcome::retry_after(delay),
    };
    let returned = Instant::now();
    let probe = Arc::clone(probe);
    outcome.and_after(async move {
        probe.settlement.record(returned.elapsed());
        if decision.verdict.is_final() {
            probe.finished(1);
        }
    })
}

/// Runs the service until the probe's target is reached, then shuts it down.
///
/// # Errors
///
/// When the service cannot start (the queue cannot be opened), or its shutdown fails.
pub(crate) async fn run(job: &Job, config: &SdkConfig, probe: Arc<Probe>) -> Result<Option<Calls>> {
    RUN.set((Arc::clone(&probe), job.behaviour))
        .map_err(|_| anyhow!("the {SYSTEM} system ran twice in one process"))?;
    let workers = NonZeroUsize::new(job.workers).unwrap_or(NonZeroUsize::MIN);
    let broker = SqsBroker::from_config(config.clone());
    let queue = job.queue_url.clone();
    let visibility = job.visibility_secs.map(Duration::from_secs);
    // On a FIFO queue, keyed workers where the broker needs them: a group's deliveries go to
    // one lane, one at a time.
    let keyed = KEYED_ON_FIFO && job.fifo_groups.is_some();
    let app = RustStream::new(AppInfo::new("loadtest", env!("CARGO_PKG_VERSION"))).with_broker(
        broker,
        move |b| match (visibility, keyed) {
            (Some(visibility), _) => {
                b.include(handle.name(queue).workers(workers).visibility(visibility));
            }
            (None, true) => {
                b.include(handle.name(queue).workers_by_key(workers));
            }
            (None, false) => {
                b.include(handle.name(queue).workers(workers));
            }
        },
    );
    let running = app
        .start()
        .await
        .map_err(|error| anyhow!("{error}"))
        .with_context(|| format!("starting the {SYSTEM} service"))?;
    probe.done.cancelled().await;
    match tokio::time::timeout(SHUTDOWN_WITHIN, running.shutdown()).await {
        Ok(result) => result
            .map_err(|error| anyhow!("{error}"))
            .with_context(|| format!("shutting the {SYSTEM} service down"))?,
        Err(_) => tracing::warn!("the {SYSTEM} service did not shut down in time"),
    }
    Ok(None)
}
