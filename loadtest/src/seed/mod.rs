//! `loadtest seed-payments`: the payments service of `seeds/src/bin/payments.rs` (its `book`
//! subscriber: decode a payment, check the in-memory ledger, publish one ledger entry through an
//! `Out` slot, ack) on sqs-engine's RustStream broker and on `ruststream-sqs-sns` 0.7, on the
//! same queue contents, each in a child process of its own.
//!
//! For each broker run: fresh `payments` and `ledger-entries` queues (on LocalStack in an
//! account of the run's own, so that nothing else touches them), `--messages` payments put on
//! `payments` with `SendMessageBatch`, then the service started; the parent polls the queues
//! until `payments` is empty (visible and in flight) and `ledger-entries` holds a message per
//! payment, and stops the service. Reported: payments per second from the service's start to
//! that point, SQS calls per payment by action, CPU seconds per 1000 payments and peak RSS of
//! the child, and the ratio sqs-engine / sqs-sns of each.
//!
//! The calls are counted on LocalStack by a [`proxy`] in front of it that only the child uses
//! (LocalStack's log names no queue, and other processes may be using it), with the log's count
//! reported beside it; on the embedded server by its own counters, less the parent's polls.
//!
//! `--fan-out` runs the fan-out variant ([`fan_out`]): each payment booked is published to an
//! SNS topic that delivers it to two queues, each consumed by a subscriber of the service. The
//! run ends when the child reports that both subscribers have handled every payment, and the
//! calls are reported apart, SQS's and SNS's (the counting proxy and the embedded server count
//! both), and in total.
//!
//! Layout: [`brokers`] compiles `service.rs` and `fan_out_service.rs` once per broker,
//! [`child`] runs one of them, [`fan_out`] sets up the fan-out variant's queues and topic.

mod brokers;
pub(crate) mod child;
mod fan_out;
mod proxy;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use serde::Serialize;
use sqs_engine::testing::{QueueDepth, queue_depth};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use self::brokers::sqs_engine_broker::Payment;
use self::child::{Broker, SeedChildResult, SeedJob};
use self::proxy::CountingProxy;
use crate::compare::{CompareArgs, ServerCalls, Target, TargetKind};
use crate::fill::now_micros;

/// How often the parent looks at the queues while the service runs.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// How long LocalStack's log is given to catch up before it is read.
const LOG_SETTLES: Duration = Duration::from_millis(500);

/// `SendMessageBatch` calls in flight while filling.
const FILL_CONCURRENCY: usize = 8;

/// How long a child may take to start its service, and to stop it.
const CHILD_WITHIN: Duration = Duration::from_secs(60);

/// How payments per second are measured, as printed and written.
const RATE_BASIS: &str = "service started (queue already full) to drained (payments: 0 visible + 0 in flight, \
     ledger-entries: one message per payment), polled every 20 ms";

/// How payments per second are measured in the fan-out variant.
const FAN_OUT_RATE_BASIS: &str = "service started (payments already full) to the service's report that the \
     subscribers of ledger and payment-notices have each handled every payment (distinct ids)";

/// Options of `loadtest seed-payments`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SeedArgs {
    /// Where SQS is. `--endpoint` (or `AWS_ENDPOINT_URL`) overrides it.
    #[arg(long, value_enum, default_value_t = TargetKind::Embedded)]
    target: TargetKind,

    /// Any SQS endpoint; overrides `--target`. Calls are then not counted.
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    endpoint: Option<String>,

    /// AWS region (default: the SDK's; us-east-1 with an endpoint).
    #[arg(long, env = "AWS_REGION")]
    region: Option<String>,

    /// Payments put on the queue for each broker's run.
    #[arg(long, default_value_t = 5000)]
    messages: u64,

    /// Deliveries of `book` at once (`.workers(..)` at the mount).
    #[arg(long, default_value_t = 32)]
    workers: usize,

    /// Repetitions; the order of the brokers is reversed on every other one.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    repetitions: u32,

    /// The fan-out variant: each payment booked is published to the SNS topic
    /// `payments-booked`, which delivers it (raw) to the queues `ledger` and `payment-notices`,
    /// each consumed by a subscriber of the service; SQS and SNS calls are counted apart.
    #[arg(long)]
    fan_out: bool,

    /// Give up on one broker's run after this many seconds.
    #[arg(long, default_value_t = 300)]
    timeout_secs: u64,

    /// Write the JSON report here (default: under the target directory).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

/// One broker's run.
#[derive(Debug, Clone, Serialize)]
struct SeedRun {
    /// The broker.
    broker: Broker,
    /// The repetition, from 0.
    repetition: u32,
    /// Whether every payment was booked within the time limit.
    completed: bool,
    /// Seconds from the service's start to drained (see [`RATE_BASIS`]).
    elapsed_secs: f64,
    /// Payments per second over that time.
    per_sec: f64,
    /// The child's SQS calls by action; `None` when not countable.
    calls: Option<BTreeMap<String, u64>>,
    /// Calls of other processes in LocalStack's log during the run (its count less the
    /// child's and the parent's), when both were counted.
    others_in_log: Option<i64>,
    /// Messages on `ledger-entries` after the service stopped (the seed's service).
    ledger_entries: Option<u64>,
    /// Messages left on each queue (visible and in flight) after the service stopped (the
    /// fan-out variant).
    left_on_queues: Option<BTreeMap<String, u64>>,
    /// What the child measured of itself.
    child: SeedChildResult,
}

/// One figure of the summary, per broker (mean over the repetitions), and their ratio.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Figure {
    /// What it is.
    pub(crate) name: String,
    /// sqs-engine's broker.
    pub(crate) sqs_engine: Option<f64>,
    /// `ruststream-sqs-sns`.
    pub(crate) sqs_sns: Option<f64>,
    /// sqs-engine / sqs-sns.
    pub(crate) ratio: Option<f64>,
}

/// What a measurement found: its figures, and whether every run booked every payment in time.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    /// The figures of the table.
    pub(crate) summary: Vec<Figure>,
    /// Whether every run completed.
    pub(crate) completed: bool,
}

impl SeedArgs {
    /// The fan-out variant on the embedded server, `messages` payments a run, `repetitions`
    /// times, its JSON report written to `json`; the other options at their defaults.
    pub(crate) fn fan_out(messages: u64, repetitions: u32, json: PathBuf) -> Self {
        Self {
            target: TargetKind::Embedded,
            endpoint: None,
            region: None,
            messages,
            workers: 32,
            repetitions,
            fan_out: true,
            timeout_secs: 120,
            json: Some(json),
        }
    }
}

/// The JSON report.
#[derive(Debug, Serialize)]
struct SeedReport {
    /// The target, as text.
    target: String,
    /// `seed` (the seed's service) or `fan-out`.
    variant: &'static str,
    /// Payments per run.
    messages: u64,
    /// Deliveries of `book` at once.
    workers: usize,
    /// Repetitions.
    repetitions: u32,
    /// How each broker ran.
    isolation: &'static str,
    /// How payments per second were measured.
    rate_basis: &'static str,
    /// How the calls were counted.
    calls_counted_by: &'static str,
    /// Every run.
    runs: Vec<SeedRun>,
    /// The figures.
    summary: Vec<Figure>,
}

/// The groups of actions in the table, each with the actions it sums.
const ACTION_GROUPS: [(&str, &[&str]); 4] = [
    ("ReceiveMessage", &["ReceiveMessage"]),
    (
        "DeleteMessage(Batch)",
        &["DeleteMessage", "DeleteMessageBatch"],
    ),
    ("SendMessage(Batch)", &["SendMessage", "SendMessageBatch"]),
    (
        "ChangeMessageVisibility(Batch)",
        &["ChangeMessageVisibility", "ChangeMessageVisibilityBatch"],
    ),
];

/// Runs the measurement: prints the table, writes the JSON report.
///
/// # Errors
///
/// When the target cannot be started, a queue cannot be made or filled, or a child fails.
pub(crate) async fn run(args: SeedArgs) -> Result<()> {
    measure(args).await.map(|_| ())
}

/// Runs the measurement, prints the table, writes the JSON report, and answers the figures.
///
/// # Errors
///
/// As [`run`].
pub(crate) async fn measure(args: SeedArgs) -> Result<Measured> {
    let target = Target::start(&CompareArgs {
        target: args.target,
        endpoint: args.endpoint.clone(),
        region: args.region.clone(),
        ..CompareArgs::default()
    })
    .await?;
    let calls_counted_by = match (&target.calls, target.name.as_str()) {
        (_, "localstack") => {
            "a counting proxy in front of LocalStack that only the child uses (LocalStack's log, which names no queue, as a cross-check)"
        }
        (ServerCalls::Embedded(_), _) if args.fan_out => {
            "the embedded server's counters of SQS and SNS calls (the parent polls no queue during the run)"
        }
        (ServerCalls::Embedded(_), _) => {
            "the embedded server's counters, less the parent's GetQueueAttributes polls"
        }
        _ => "not counted (any other endpoint)",
    };
    eprintln!(
        "seed-payments{} on {}: {} payments, workers({}), {} repetition(s); each broker in a child process of its own",
        if args.fan_out { " --fan-out" } else { "" },
        target.name,
        args.messages,
        args.workers,
        args.repetitions
    );
    let mut runs = Vec::new();
    for repetition in 0..args.repetitions {
        let mut order = [Broker::SqsEngine, Broker::SqsSns];
        if repetition % 2 == 1 {
            order.reverse();
        }
        for broker in order {
            let run = run_one(&args, &target, broker, repetition).await?;
            eprintln!(
                "{} (repetition {}): {} payments in {:.2} s ({:.0}/s){}",
                broker.label(),
                repetition + 1,
                args.messages,
                run.elapsed_secs,
                run.per_sec,
                if run.completed { "" } else { ", INCOMPLETE" }
            );
            runs.push(run);
        }
    }
    let summary = summarise(&runs, args.messages, args.fan_out);
    print_table(&target.name, &args, &runs, &summary, calls_counted_by);
    let report = SeedReport {
        variant: if args.fan_out { "fan-out" } else { "seed" },
        target: target.name.clone(),
        messages: args.messages,
        workers: args.workers,
        repetitions: args.repetitions,
        isolation: "each broker's run in a child process of its own (CPU by getrusage, peak RSS by VmHWM)",
        rate_basis: if args.fan_out {
            FAN_OUT_RATE_BASIS
        } else {
            RATE_BASIS
        },
        calls_counted_by,
        runs,
        summary,
    };
    let path = match &args.json {
        Some(path) => path.clone(),
        None => {
            let dir = crate::compare::output_dir();
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let variant = if args.fan_out { "-fan-out" } else { "" };
            dir.join(format!("seed-payments{variant}-{}.json", target.name))
        }
    };
    crate::report::write_json(&path, &report)?;
    println!("JSON: {}", path.display());
    Ok(Measured {
        completed: report.runs.iter().all(|run| run.completed),
        summary: report.summary,
    })
}

/// One broker's run on fresh queues.
async fn run_one(
    args: &SeedArgs,
    target: &Target,
    broker: Broker,
    repetition: u32,
) -> Result<SeedRun> {
    let localstack = target.name == "localstack";
    // LocalStack names the account after a 12-digit access key: the run's queues are its own.
    let access_key =
        localstack.then(|| format!("{:012}", 100_000_000_000 + now_micros() % 800_000_000_000));
    let config = child::sdk_config(
        target.endpoint.clone(),
        args.region.clone(),
        access_key.as_deref(),
    )
    .await;
    let client = Client::new(&config);
    // The queues of the run, `payments` first.
    let queues = if args.fan_out {
        fan_out::prepare(&config, &client).await?
    } else {
        let mut queues = Vec::new();
        for name in ["payments", "ledger-entries"] {
            queues.push((name.to_owned(), fresh_queue(&client, name).await?));
        }
        queues
    };
    let payments = queues[0].1.clone();
    fill(&client, &payments, args.messages).await?;

    let proxy = match (&target.endpoint, localstack) {
        (Some(endpoint), true) => Some(CountingProxy::start(endpoint).await?),
        _ => None,
    };
    let job = SeedJob {
        broker,
        endpoint: proxy
            .as_ref()
            .map(|proxy| proxy.endpoint().to_owned())
            .or_else(|| target.endpoint.clone()),
        region: args.region.clone(),
        access_key: access_key.clone(),
        workers: args.workers,
        fan_out: args.fan_out.then_some(args.messages),
    };
    let mark = target.calls.mark();
    let mut child = Command::new(std::env::current_exe().context("finding this binary")?)
        .arg("run-seed")
        .arg("--job")
        .arg(serde_json::to_string(&job)?)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting a child")?;
    let mut lines = child_lines(&mut child)?;
    match tokio::time::timeout(CHILD_WITHIN, lines.recv()).await {
        Ok(Some(line)) if line == child::STARTED => {}
        Ok(other) => {
            let _ = child.kill();
            bail!(
                "{}: the child did not start its service ({other:?})",
                broker.label()
            );
        }
        Err(_) => {
            let _ = child.kill();
            bail!(
                "{}: the child did not start its service in time",
                broker.label()
            );
        }
    }

    let start = Instant::now();
    let limit = Duration::from_secs(args.timeout_secs);
    let mut polls = 0_u64;
    let completed = if args.fan_out {
        // The child says when both subscribers have handled every payment.
        loop {
            match tokio::time::timeout_at((start + limit).into(), lines.recv()).await {
                Ok(Some(line)) if line == child::DRAINED => break true,
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break false,
            }
        }
    } else {
        loop {
            let payments = depth(&client, &payments).await?;
            let entries = depth(&client, &queues[1].1).await?.visible;
            polls += 2;
            if payments == QueueDepth::default() && entries >= args.messages {
                break true;
            }
            if start.elapsed() > limit {
                break false;
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    };
    let elapsed_secs = start.elapsed().as_secs_f64();

    // Stop the service: a line on its stdin, then its result.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = writeln!(stdin);
    }
    let result = loop {
        match tokio::time::timeout(CHILD_WITHIN, lines.recv()).await {
            Ok(Some(line)) => {
                if let Some(json) = line.strip_prefix(child::RESULT) {
                    break serde_json::from_str::<SeedChildResult>(json)?;
                }
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                bail!("{}: the child printed no result", broker.label());
            }
        }
    };
    let status = tokio::task::spawn_blocking(move || child.wait()).await??;
    if !status.success() {
        bail!("{}: the child failed ({status})", broker.label());
    }

    if proxy.is_some() {
        // LocalStack writes a call's log line after answering it: let the last ones land.
        tokio::time::sleep(LOG_SETTLES).await;
    }
    let logged = target.calls.all_since(&mark);
    let (calls, others_in_log) = match &proxy {
        Some(proxy) => {
            let calls = proxy.counts();
            let others =
                logged.map(|logged| total(&logged) as i64 - total(&calls) as i64 - polls as i64);
            (Some(calls), others)
        }
        None => {
            let calls = logged.map(|mut calls| {
                if let Some(count) = calls.get_mut("GetQueueAttributes") {
                    *count -= polls.min(*count);
                }
                calls.retain(|_, count| *count > 0);
                calls
            });
            (calls, None)
        }
    };
    let (ledger_entries, left_on_queues) = if args.fan_out {
        let mut left = BTreeMap::new();
        for (name, url) in &queues {
            let left_here = depth(&client, url).await?;
            left.insert(name.clone(), left_here.visible + left_here.in_flight);
        }
        (None, Some(left))
    } else {
        let entries = depth(&client, &queues[1].1).await?.visible;
        (Some(entries), None)
    };
    if localstack {
        for (_, url) in &queues {
            let _ = client.delete_queue().queue_url(url).send().await;
        }
        if args.fan_out {
            fan_out::delete_topic(&config).await;
        }
    }
    Ok(SeedRun {
        broker,
        repetition,
        completed,
        elapsed_secs,
        per_sec: crate::report::per_sec(args.messages, elapsed_secs),
        calls,
        others_in_log,
        ledger_entries,
        left_on_queues,
        child: result,
    })
}

/// The child's stdout, line by line, read on a thread of its own.
fn child_lines(child: &mut std::process::Child) -> Result<mpsc::UnboundedReceiver<String>> {
    let stdout = child.stdout.take().context("the child's stdout")?;
    let (sender, receiver) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    Ok(receiver)
}

/// Every call in `calls`.
fn total(calls: &BTreeMap<String, u64>) -> u64 {
    calls.values().sum()
}

/// The URL of queue `name`, created when missing and emptied when not empty.
async fn fresh_queue(client: &Client, name: &str) -> Result<String> {
    let url = client
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .map_err(|error| anyhow::anyhow!("CreateQueue {name}: {}", DisplayErrorContext(error)))?
        .queue_url
        .with_context(|| format!("CreateQueue {name} answered no URL"))?;
    if depth(client, &url).await? != QueueDepth::default() {
        client
            .purge_queue()
            .queue_url(&url)
            .send()
            .await
            .map_err(|error| {
                anyhow::anyhow!("PurgeQueue {name}: {}", DisplayErrorContext(error))
            })?;
        let emptied = Instant::now();
        while depth(client, &url).await? != QueueDepth::default() {
            if emptied.elapsed() > CHILD_WITHIN {
                bail!("queue {name} is not empty a minute after PurgeQueue");
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
    Ok(url)
}

/// The approximate counts of the queue at `url`.
async fn depth(client: &Client, url: &str) -> Result<QueueDepth> {
    queue_depth(client, url)
        .await
        .with_context(|| format!("GetQueueAttributes {url}"))
}

/// The body of payment `id`: the seed's `Payment` as JSON, not under review.
fn payment_body(id: u64) -> Result<String> {
    Ok(serde_json::to_string(&Payment {
        id,
        account: format!("acct-{}", id % 97),
        amount_cents: 100 + id * 7_919 % 100_000,
        under_review: false,
    })?)
}

/// Puts payments `0..messages` on the queue with `SendMessageBatch`, ten a call.
async fn fill(client: &Client, url: &str, messages: u64) -> Result<()> {
    let batches: Vec<Vec<u64>> = (0..messages)
        .collect::<Vec<_>>()
        .chunks(10)
        .map(<[u64]>::to_vec)
        .collect();
    let mut tasks = JoinSet::new();
    for lane in 0..FILL_CONCURRENCY {
        let lane_batches: Vec<Vec<u64>> = batches
            .iter()
            .skip(lane)
            .step_by(FILL_CONCURRENCY)
            .cloned()
            .collect();
        let client = client.clone();
        let url = url.to_owned();
        tasks.spawn(async move {
            for batch in lane_batches {
                let mut entries = Vec::with_capacity(batch.len());
                for id in &batch {
                    entries.push(
                        SendMessageBatchRequestEntry::builder()
                            .id(id.to_string())
                            .message_body(payment_body(*id)?)
                            .build()?,
                    );
                }
                let output = client
                    .send_message_batch()
                    .queue_url(&url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(|error| {
                        anyhow::anyhow!("SendMessageBatch: {}", DisplayErrorContext(error))
                    })?;
                if !output.failed().is_empty() {
                    bail!("SendMessageBatch refused {} entries", output.failed().len());
                }
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined??;
    }
    Ok(())
}

/// The mean of `values`, `None` when empty.
fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values
        .into_iter()
        .fold((0.0, 0_u32), |(sum, count), value| (sum + value, count + 1));
    (count > 0).then(|| sum / f64::from(count))
}

/// How one figure is read from a run (`None`: not measured).
type FigureOf<'a> = Box<dyn Fn(&SeedRun) -> Option<f64> + 'a>;

/// The groups of SNS actions in the fan-out variant's table, each with the actions it sums.
const SNS_ACTION_GROUPS: [(&str, &[&str]); 1] = [("Publish(Batch)", &["Publish", "PublishBatch"])];

/// The calls of `calls` whose action `keep` takes, per payment.
fn per_payment_where(
    calls: &BTreeMap<String, u64>,
    messages: u64,
    keep: impl Fn(&str) -> bool,
) -> f64 {
    calls
        .iter()
        .filter(|(action, _)| keep(action))
        .map(|(_, count)| *count)
        .sum::<u64>() as f64
        / messages.max(1) as f64
}

/// The figures of the table, per broker, mean over the repetitions; with `fan_out`, the SNS
/// calls apart, and the SQS and SNS totals.
fn summarise(runs: &[SeedRun], messages: u64, fan_out: bool) -> Vec<Figure> {
    let per_payment = |calls: &BTreeMap<String, u64>, actions: &[&str]| {
        actions
            .iter()
            .map(|action| calls.get(*action).copied().unwrap_or(0))
            .sum::<u64>() as f64
            / messages.max(1) as f64
    };
    let grouped: Vec<&str> = ACTION_GROUPS
        .iter()
        .flat_map(|(_, actions)| actions.iter().copied())
        .collect();
    let mut figures: Vec<(String, FigureOf<'_>)> = vec![(
        "payments/s".to_owned(),
        Box::new(|run: &SeedRun| Some(run.per_sec)),
    )];
    for (name, actions) in ACTION_GROUPS {
        figures.push((
            format!("{name} per payment"),
            Box::new(move |run: &SeedRun| {
                run.calls.as_ref().map(|calls| per_payment(calls, actions))
            }),
        ));
    }
    let other = grouped.clone();
    figures.push((
        "other SQS calls per payment".to_owned(),
        Box::new(move |run: &SeedRun| {
            run.calls.as_ref().map(|calls| {
                per_payment_where(calls, messages, |action| {
                    !other.contains(&action) && !fan_out::is_sns(action)
                })
            })
        }),
    ));
    if fan_out {
        figures.push((
            "SQS calls per payment".to_owned(),
            Box::new(move |run: &SeedRun| {
                run.calls.as_ref().map(|calls| {
                    per_payment_where(calls, messages, |action| !fan_out::is_sns(action))
                })
            }),
        ));
        for (name, actions) in SNS_ACTION_GROUPS {
            figures.push((
                format!("{name} per payment"),
                Box::new(move |run: &SeedRun| {
                    run.calls.as_ref().map(|calls| per_payment(calls, actions))
                }),
            ));
        }
        figures.push((
            "other SNS calls per payment".to_owned(),
            Box::new(move |run: &SeedRun| {
                run.calls.as_ref().map(|calls| {
                    per_payment_where(calls, messages, |action| {
                        fan_out::is_sns(action)
                            && !SNS_ACTION_GROUPS
                                .iter()
                                .any(|(_, actions)| actions.contains(&action))
                    })
                })
            }),
        ));
        figures.push((
            "SNS calls per payment".to_owned(),
            Box::new(move |run: &SeedRun| {
                run.calls
                    .as_ref()
                    .map(|calls| per_payment_where(calls, messages, fan_out::is_sns))
            }),
        ));
    }
    figures.push((
        "calls per payment (total)".to_owned(),
        Box::new(move |run: &SeedRun| {
            run.calls
                .as_ref()
                .map(|calls| total(calls) as f64 / messages.max(1) as f64)
        }),
    ));
    figures.push((
        "CPU s per 1000 payments".to_owned(),
        Box::new(move |run: &SeedRun| Some(run.child.cpu_secs * 1000.0 / messages.max(1) as f64)),
    ));
    figures.push((
        "peak RSS MiB".to_owned(),
        Box::new(|run: &SeedRun| Some(run.child.max_rss_kib as f64 / 1024.0)),
    ));
    figures
        .into_iter()
        .map(|(name, figure)| {
            let of = |broker: Broker| -> Option<f64> {
                let values: Option<Vec<f64>> = runs
                    .iter()
                    .filter(|run| run.broker == broker)
                    .map(&figure)
                    .collect();
                values.and_then(mean)
            };
            let sqs_engine = of(Broker::SqsEngine);
            let sqs_sns = of(Broker::SqsSns);
            let ratio = match (sqs_engine, sqs_sns) {
                (Some(engine), Some(sns)) if sns != 0.0 => Some(engine / sns),
                _ => None,
            };
            Figure {
                name,
                sqs_engine,
                sqs_sns,
                ratio,
            }
        })
        .collect()
}

/// Prints the table and the raw counts to stdout.
fn print_table(
    target: &str,
    args: &SeedArgs,
    runs: &[SeedRun],
    summary: &[Figure],
    counted_by: &str,
) {
    let show =
        |value: Option<f64>| value.map_or_else(|| "n/a".to_owned(), |value| format!("{value:.3}"));
    println!();
    println!(
        "seed-payments{} on {target}: {} payments, workers({}), {} repetition(s), each broker in a child process of its own",
        if args.fan_out {
            " --fan-out (topic payments-booked -> queues ledger, payment-notices)"
        } else {
            ""
        },
        args.messages,
        args.workers,
        args.repetitions
    );
    println!(
        "payments/s: {}",
        if args.fan_out {
            FAN_OUT_RATE_BASIS
        } else {
            RATE_BASIS
        }
    );
    println!("calls: {counted_by}");
    println!();
    println!(
        "{:<44} {:>12} {:>12} {:>18}",
        "figure (mean)", "sqs-engine", "sqs-sns", "engine / sqs-sns"
    );
    for figure in summary {
        println!(
            "{:<44} {:>12} {:>12} {:>18}",
            figure.name,
            show(figure.sqs_engine),
            show(figure.sqs_sns),
            show(figure.ratio)
        );
    }
    println!();
    for run in runs {
        let calls = run.calls.as_ref().map_or_else(
            || "not counted".to_owned(),
            |calls| {
                calls
                    .iter()
                    .map(|(action, count)| format!("{action} {count}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        );
        let others = run
            .others_in_log
            .map(|others| {
                if others < 0 {
                    // A long poll under way when the service stopped was counted by the proxy
                    // but, cut short, never logged by LocalStack.
                    format!(
                        "; LocalStack's log {} call(s) short of the proxy's count (long polls cut \
                         short at shutdown are not logged)",
                        -others
                    )
                } else {
                    format!("; other processes' calls in LocalStack's log meanwhile: {others}")
                }
            })
            .unwrap_or_default();
        let queues = match (&run.ledger_entries, &run.left_on_queues) {
            (Some(entries), _) => format!("ledger-entries {entries}"),
            (None, Some(left)) => format!(
                "left on the queues after the stop: {}",
                left.iter()
                    .map(|(queue, count)| format!("{queue} {count}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            (None, None) => String::new(),
        };
        println!(
            "{} rep {}: {calls}; {queues}{}{others}",
            run.broker.label(),
            run.repetition + 1,
            if run.completed { "" } else { "; INCOMPLETE" },
        );
    }
}
