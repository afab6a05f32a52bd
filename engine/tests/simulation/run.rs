//! Runs one seed: the real engine, one or two consumers, against the in-process SQS through the
//! fault layer, on a paused tokio clock on this thread. The engine's own random draws (backoff
//! jitter, FIFO attempt ids) come from fastrand's generator for this thread, seeded here from
//! the run's seed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqs_engine::testing::{Applied, Defect, InProcessSqs, inject_defect};
use sqs_engine::{BatchOutcome, Engine, Message, Outcome, SendEntry, Stats};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::faults::FaultySqs;
use crate::handle::{PANIC_MARKER, handle};
use crate::record::{Event, Record, Stamped};
use crate::stopped::Stopped;
use crate::workload::{Api, ConsumerPlan, End, Workload};

/// Everything a run leaves behind, for the invariants and the trace.
#[derive(Debug, Clone)]
pub struct Run {
    pub workload: Workload,
    /// When the run began, on tokio's clock.
    pub start: tokio::time::Instant,
    pub events: Vec<Stamped>,
    pub journal: Vec<Applied>,
    /// The message ids still on the queue, and on the dead-letter queue, at the end.
    pub remaining: Vec<String>,
    pub dead_lettered: Vec<String>,
    pub stopped: Vec<Stopped>,
    /// Each message's name (its body without the padding) by its message id.
    pub names: Vec<(String, String)>,
    /// The panics during the run other than the handlers' deliberate ones.
    pub panics: usize,
}

thread_local! {
    /// The panics on this thread other than the handlers' deliberate ones, as the panic hook
    /// counts them (see `quiet_deliberate_panics`).
    pub static PANICS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs `seed`, with `defect` switched on in the engine.
pub fn run(seed: u64, defect: Option<Defect>) -> Run {
    let workload = Workload::draw(seed);
    fastrand::seed(seed ^ 0x9e37_79b9_7f4a_7c15);
    let _defect = inject_defect(defect);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    let panics = PANICS.with(std::cell::Cell::get);
    let mut run = runtime.block_on(simulate(workload));
    drop(runtime);
    run.panics = PANICS.with(std::cell::Cell::get) - panics;
    run
}

async fn simulate(workload: Workload) -> Run {
    let sqs = InProcessSqs::journaled();
    if let Some(chance) = workload.duplicates {
        sqs.duplicate_deliveries(chance, workload.seed.wrapping_mul(41).wrapping_add(13));
    }
    let record = Record::new(sqs.clone());
    if let Some(at) = workload.queue_deleted_at {
        let (sqs, record, queue) = (sqs.clone(), record.clone(), workload.queue.clone());
        tokio::spawn(async move {
            tokio::time::sleep_until(record.start() + at).await;
            sqs.delete_queue(&queue);
            record.push(Event::QueueDeleted);
        });
    }
    let workload = Arc::new(workload);
    let ids = Arc::new(Mutex::new(Vec::new()));
    tokio::spawn(send_all(
        sqs.clone(),
        Arc::clone(&workload),
        Arc::clone(&ids),
    ));
    let fault_draws = Arc::new(Mutex::new(fastrand::Rng::with_seed(
        workload.seed.wrapping_mul(31).wrapping_add(7),
    )));
    let more_draws = Arc::new(Mutex::new(fastrand::Rng::with_seed(
        workload.seed.wrapping_mul(37).wrapping_add(11),
    )));
    let mut consumers = Vec::new();
    for consumer in 0..workload.consumers.len() {
        consumers.push(tokio::spawn(consume(
            consumer,
            sqs.clone(),
            record.clone(),
            Arc::clone(&workload),
            Arc::clone(&fault_draws),
            Arc::clone(&more_draws),
        )));
    }
    let mut stopped = Vec::new();
    for consumer in consumers {
        stopped.push(consumer.await.expect("the consumer's task ends"));
    }
    let ids: Vec<(String, String)> = ids.lock().expect("ids").clone();
    let id_of = |body: &String| {
        ids.iter()
            .find(|(sent, _)| sent == body.trim_end_matches('.'))
            .map_or_else(|| format!("unknown body {body}"), |(_, id)| id.clone())
    };
    let remaining = sqs.bodies(&workload.queue).iter().map(id_of).collect();
    let dead_lettered = workload
        .redrive
        .as_ref()
        .map(|(dead_letter, _)| sqs.bodies(dead_letter).iter().map(id_of).collect())
        .unwrap_or_default();
    Run {
        workload: Workload::clone(&workload),
        start: record.start(),
        events: record.snapshot(),
        journal: sqs.journal(),
        remaining,
        dead_lettered,
        stopped,
        names: ids,
        panics: 0,
    }
}

/// Sends the workload's messages, each at its time.
async fn send_all(
    sqs: InProcessSqs,
    workload: Arc<Workload>,
    ids: Arc<Mutex<Vec<(String, String)>>>,
) {
    let start = tokio::time::Instant::now();
    let mut messages = workload.messages.clone();
    messages.sort_by_key(|message| message.send_at);
    for message in messages {
        tokio::time::sleep_until(start + message.send_at).await;
        let entry = SendEntry {
            body: workload.body(&message.body),
            attributes: Vec::new(),
            deduplication_id: message.group.as_ref().map(|_| message.body.clone()),
            group_id: message.group.clone(),
        };
        match sqs.send_entry(&workload.queue, &entry) {
            Ok(id) => ids.lock().expect("ids").push((message.body, id)),
            // The queue is gone: what was to be sent to it never is.
            Err(_) if workload.queue_deleted_at.is_some() => {}
            Err(error) => panic!("sending {}: {error}", message.body),
        }
    }
}

/// Runs consumer `consumer` until its shutdown moment, and says how it stopped.
async fn consume(
    consumer: usize,
    sqs: InProcessSqs,
    record: Record,
    workload: Arc<Workload>,
    fault_draws: Arc<Mutex<fastrand::Rng>>,
    more_draws: Arc<Mutex<fastrand::Rng>>,
) -> Stopped {
    let plan = workload.consumers[consumer].clone();
    let stats = Arc::new(Mutex::new(None));
    let sqs_now = sqs.clone();
    let api = FaultySqs {
        sqs,
        consumer,
        record: record.clone(),
        rng: fault_draws,
        fault_rate: workload.fault_rate,
        call_timeout: workload.call_timeout,
        queue: workload.queue.clone(),
        stats: Arc::clone(&stats),
        workload: Arc::clone(&workload),
        more: more_draws,
    };
    #[cfg(feature = "ruststream")]
    if plan.broker {
        let until = shutdown_moment(&record, &workload, &plan, sqs_now);
        return crate::broker::consume(consumer, api, record, workload, plan, until).await;
    }
    let mut builder = Engine::builder()
        .api(api)
        .queue(workload.queue.clone())
        .receivers(plan.receivers)
        .workers(plan.workers)
        .prefetch(plan.prefetch)
        .max_held(plan.max_held)
        .receive_batch(plan.receive_batch)
        .wait_time(plan.wait_time)
        .visibility_timeout(Duration::from_secs(u64::from(plan.visibility)))
        .heartbeat(plan.heartbeat)
        .max_batch_wait(plan.max_batch_wait)
        .shutdown_timeout(plan.shutdown_timeout)
        .backoff(workload.backoff)
        .max_batches_in_flight(plan.max_batches_in_flight)
        .give_up_after(plan.give_up_after);
    if let Some(bytes) = plan.max_held_bytes {
        builder = builder.max_held_bytes(bytes);
    }
    if let Some((dead_letter, receives)) = &workload.redrive {
        builder = builder
            .max_attempts(*receives)
            .dead_letter(dead_letter.clone())
            .create_if_missing(true);
    }
    let engine = builder.build().expect("the drawn settings are valid");
    *stats.lock().expect("stats") = Some(engine.stats());
    let health = engine.health();
    let shutdown = {
        let record = record.clone();
        let until = shutdown_moment(&record, &workload, &plan, sqs_now);
        async move {
            until.await;
            record.push(Event::ShutdownSignalled { consumer });
        }
    };
    let handling = Handling {
        consumer,
        record: record.clone(),
        workload: Arc::clone(&workload),
        visibility: plan.visibility,
    };
    let result = match plan.api {
        Api::Handler => engine
            .run(handler(handling), shutdown)
            .await
            .map_err(|error| with_sources(&error)),
        Api::Batches => engine
            .run_batches(batch_handler(handling), shutdown)
            .await
            .map_err(|error| with_sources(&error)),
        Api::Pull => pull(consumer, engine, &record, &workload, &plan, shutdown)
            .await
            .map_err(|error| with_sources(&*error)),
    };
    let at = record.elapsed();
    let detail = match &result {
        Ok(stats) => format!(
            "received {} acked {:?} dropped {:?} retried {:?} retried_after {:?} extensions {:?} unsettled {} in_flight {}",
            stats.messages_received,
            (stats.acked.ok, stats.acked.failed),
            (stats.dropped.ok, stats.dropped.failed),
            (stats.retried.ok, stats.retried.failed),
            (stats.retried_after.ok, stats.retried_after.failed),
            (stats.extensions.ok, stats.extensions.failed),
            stats.unsettled,
            stats.in_flight,
        ),
        Err(error) => format!("error: {error}"),
    };
    record.push(Event::Stopped { consumer, detail });
    Stopped {
        at,
        stats: Some(result),
        healthy: Some(health.snapshot().is_healthy()),
    }
}

/// `error` and each of its sources, joined by `: `.
fn with_sources(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// When a consumer is told to shut down: at its planned moment; in a liveness run, once every
/// message was sent and the queue holds none (each deleted or dead-lettered), or at the
/// run's `settle_by` at the latest.
pub fn shutdown_moment(
    record: &Record,
    workload: &Arc<Workload>,
    plan: &ConsumerPlan,
    sqs: InProcessSqs,
) -> impl Future<Output = ()> + Send + 'static {
    let start = record.start();
    let workload = Arc::clone(workload);
    let planned = plan.shutdown_at;
    async move {
        let Some(liveness) = workload.liveness else {
            tokio::time::sleep_until(start + planned).await;
            return;
        };
        let last_send = workload
            .messages
            .iter()
            .map(|message| message.send_at)
            .max()
            .unwrap_or_default();
        let deadline = start + liveness.settle_by;
        loop {
            let now = tokio::time::Instant::now();
            let counts = sqs.counts(&workload.queue);
            let empty = counts.visible == 0 && counts.in_flight == 0 && counts.delayed == 0;
            if now >= deadline || (now >= start + last_send && empty) {
                return;
            }
            tokio::time::sleep_until(deadline.min(now + Duration::from_secs(5))).await;
        }
    }
}

/// What the handlers of a consumer share: whose they are, the record they write to, the
/// workload that says what each does, and the visibility timeout its receives ask for.
#[derive(Clone)]
struct Handling {
    consumer: usize,
    record: Record,
    workload: Arc<Workload>,
    visibility: u32,
}

/// The handler of one message: what the workload says.
fn handler(
    handling: Handling,
) -> impl Fn(Message) -> std::pin::Pin<Box<dyn Future<Output = Result<Outcome, String>> + Send>>
+ Send
+ Sync
+ 'static {
    move |message: Message| {
        let handling = handling.clone();
        Box::pin(async move {
            let end = handle(
                handling.consumer,
                &handling.record,
                &handling.workload,
                handling.visibility,
                message.id().to_owned(),
                message.receive_count(),
                message.body(),
            )
            .await;
            match end {
                End::Fail => Err("simulated handler failure".to_owned()),
                End::Panic => std::panic::panic_any(PANIC_MARKER),
                end => Ok(outcome(end)),
            }
        })
    }
}

/// The outcome a handler's `end` settles with (a failure as the caller's retry).
fn outcome(end: End) -> Outcome {
    match end {
        End::Ack => Outcome::Ack,
        End::Drop => Outcome::Drop,
        End::Retry | End::Fail | End::Panic => Outcome::Retry,
        End::RetryAfter(delay) => Outcome::RetryAfter(delay),
    }
}

/// The handler of a receive's messages together: each does what the workload says, all at
/// once; should one of them panic, the whole batch does, and none of them is settled.
fn batch_handler(
    handling: Handling,
) -> impl Fn(Vec<Message>) -> std::pin::Pin<Box<dyn Future<Output = BatchOutcome> + Send>>
+ Send
+ Sync
+ 'static {
    move |messages: Vec<Message>| {
        let Handling {
            consumer,
            record,
            workload,
            visibility,
        } = handling.clone();
        Box::pin(async move {
            let mut behaviours = Vec::new();
            for message in &messages {
                record.push(Event::Started {
                    consumer,
                    message_id: message.id().to_owned(),
                    receive_count: message.receive_count(),
                });
                behaviours.push(workload.behaviour(
                    message.body(),
                    message.receive_count(),
                    visibility,
                ));
            }
            let work = behaviours.iter().map(|b| b.work).max().unwrap_or_default();
            tokio::time::sleep(work).await;
            let panics = behaviours.iter().any(|b| b.end == End::Panic);
            for (message, behaviour) in messages.iter().zip(&behaviours) {
                record.push(Event::Ended {
                    consumer,
                    message_id: message.id().to_owned(),
                    receive_count: message.receive_count(),
                    end: if panics { End::Panic } else { behaviour.end },
                });
            }
            if panics {
                std::panic::panic_any(PANIC_MARKER);
            }
            BatchOutcome::Each(behaviours.iter().map(|b| outcome(b.end)).collect())
        })
    }
}

/// Consumes through the pull API: at most `workers` deliveries out at once, each settled by a
/// task of its own as the workload says (a panic drops it unsettled); at the shutdown signal,
/// closes the consumer, waits up to the shutdown timeout for the tasks, then shuts down.
async fn pull(
    consumer: usize,
    engine: Engine,
    record: &Record,
    workload: &Arc<Workload>,
    plan: &ConsumerPlan,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Stats, Box<dyn std::error::Error>> {
    let stats = engine.stats();
    let mut pulled = engine.consumer().await?;
    let handle = pulled.handle();
    let slots = Arc::new(Semaphore::new(plan.workers));
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            permit = Arc::clone(&slots).acquire_owned() => permit.expect("never closed"),
        };
        let delivery = tokio::select! {
            biased;
            () = &mut shutdown => break,
            delivery = pulled.recv() => delivery,
        };
        let Some(delivery) = delivery else {
            break;
        };
        let record = record.clone();
        let workload = Arc::clone(workload);
        let visibility = plan.visibility;
        tasks.spawn(async move {
            let message = delivery.message();
            let end = handle_message(consumer, &record, &workload, visibility, message).await;
            let (message_id, receive_count) = (message.id().to_owned(), message.receive_count());
            if end != End::Panic
                && let Err(error) = delivery.settle(outcome(end)).await
            {
                record.push(Event::SettleFailed {
                    consumer,
                    message_id,
                    receive_count,
                    error: with_sources(&error),
                });
            }
            drop(permit);
        });
        while tasks.try_join_next().is_some() {}
    }
    pulled.close().await;
    let deadline = tokio::time::Instant::now() + plan.shutdown_timeout;
    while let Ok(Some(_)) = tokio::time::timeout_at(deadline, tasks.join_next()).await {}
    tasks.abort_all();
    drop(pulled);
    handle.shutdown().await;
    // The pull API has no `run` to return the engine's giving up: its deliveries end, and its
    // health says why.
    let health = handle.health().snapshot();
    if health.gave_up {
        let failure = health
            .permanent_failure
            .map_or_else(|| "no failure kept".to_owned(), |error| error.to_string());
        return Err(Box::new(PullError(format!(
            "the consumer of queue `{}` gave up, its health says: {failure}",
            health.queue
        ))));
    }
    Ok(stats.snapshot())
}

/// Why a consumer on the pull API stopped receiving, as its health tells.
#[derive(Debug)]
struct PullError(String);

impl std::fmt::Display for PullError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PullError {}

/// [`handle`] for a delivered message.
async fn handle_message(
    consumer: usize,
    record: &Record,
    workload: &Workload,
    visibility: u32,
    message: &Message,
) -> End {
    handle(
        consumer,
        record,
        workload,
        visibility,
        message.id().to_owned(),
        message.receive_count(),
        message.body(),
    )
    .await
}
