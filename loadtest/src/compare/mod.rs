//! `loadtest` (no subcommand) and `loadtest compare`: sqs-engine against the other ways to
//! consume SQS, on the same queue contents, each system in a child process of its own that
//! measures itself; every figure is also given as a ratio against the naive loop and the raw
//! ceiling measured in the same run.
//!
//! Latency: on the embedded server, each scenario runs at one or more latencies added to
//! every call ([`crate::server::Latency`]): by default every scenario at loopback, and
//! ack-only and io-5ms at the SQS-like distribution too (see [`plan`]); the rows, runs and
//! plot carry the latency, and the ratios compare systems at the same latency.
//!
//! Latencies: `settle` is handler return to SQS's answer for the settlement, measured in the
//! child; `send>handler` is the send time (written in the body) to handler start, measured in
//! the child; `send>settled` is the embedded server's own `SendMessage` to its answer to the
//! message's delete (so an ack or drop settled), measured by the server for every system
//! alike, and absent on other targets.
//!
//! Layout: [`scenario`] says what is run, [`system`] the systems and [`systems`] how each
//! runs (one module each), [`job`] what parent and child exchange, [`child`] the child side,
//! [`probe`] and [`recorder`] what a child measures, [`record`] and [`comparison`] what a run
//! and the whole comparison record, [`summary`] the aggregation, table and goals, and
//! [`plot`] the SVG. The gate CI runs on a comparison is [`crate::ci`].

pub(crate) mod child;
mod comparison;
mod handlers_alone;
mod job;
mod plot;
mod probe;
mod record;
mod recorder;
mod scenario;
mod summary;
mod system;
mod systems;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::DisplayErrorContext;
use serde::Serialize;
use tracing::{info, warn};

pub(crate) use self::comparison::Comparison;
use self::job::{ChildResult, Job};
use self::probe::Percentiles;
pub(crate) use self::record::RunRecord;
pub(crate) use self::scenario::{FAST_MESSAGES_AT_LATENCY, Scenario, ScenarioKind};
pub(crate) use self::summary::Summary;
pub(crate) use self::system::System;
use crate::fill::fill_queue;
use crate::server::{DEFAULT_SEED, EmbeddedSqs, Latency};
use crate::target::TargetArgs;

/// LocalStack's address when started by `scripts/localstack.sh`: on 127.0.0.1, at the port
/// the script reads from `LOCALSTACK_PORT` (4566 by default), which the script run from here
/// inherits.
fn localstack_endpoint() -> String {
    let port = std::env::var("LOCALSTACK_PORT")
        .ok()
        .and_then(|port| port.parse::<u16>().ok())
        .unwrap_or(4566);
    format!("http://127.0.0.1:{port}")
}

/// The workspace's scripts, as built.
const LOCALSTACK_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/localstack.sh");

/// Where SQS is, for a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum TargetKind {
    /// The embedded in-memory server, started in this process (a benchmark target).
    Embedded,
    /// LocalStack on 127.0.0.1:4566 (or the port `LOCALSTACK_PORT` names), started with
    /// `scripts/localstack.sh start` when none answers.
    Localstack,
}

/// Options of a comparison.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CompareArgs {
    /// Where SQS is. `--endpoint` (or `AWS_ENDPOINT_URL`) overrides it with any SQS, AWS
    /// included.
    #[arg(long, value_enum, default_value_t = TargetKind::Embedded)]
    pub(crate) target: TargetKind,

    /// Any SQS endpoint; overrides `--target`. Calls the systems cannot count themselves are
    /// then not counted.
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    pub(crate) endpoint: Option<String>,

    /// AWS region (default: the SDK's; us-east-1 with an endpoint).
    #[arg(long, env = "AWS_REGION")]
    pub(crate) region: Option<String>,

    /// Scenarios to run (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(crate) scenarios: Vec<ScenarioKind>,

    /// Systems to run (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(crate) systems: Vec<System>,

    /// Repetitions; the order of the systems is reversed on every other one.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub(crate) repetitions: u32,

    /// Scale of the message counts (1.0: 20 000 ack-only; this and the other scales are
    /// above 0 and at most 100). Default 1.0 on the embedded server, 0.25 elsewhere.
    #[arg(long, value_parser = scenario::parse_scale)]
    pub(crate) scale: Option<f64>,

    /// Handler invocations at once, for every system.
    #[arg(long, default_value_t = 64)]
    pub(crate) workers: usize,

    /// The most long-poll receivers of sqs-engine (it runs as many as keep up). Without it,
    /// the engine's default.
    #[arg(long)]
    pub(crate) receivers: Option<usize>,

    /// Receive-and-delete loops of the raw ceiling: enough calls in flight that the target,
    /// not the loop, is the limit (at loopback; see `--latency-ceiling-loops`).
    #[arg(long, default_value_t = 16)]
    pub(crate) ceiling_loops: usize,

    /// Latencies the embedded server adds to every call, comma-separated: `none`
    /// (loopback), `sqs` (log-normal, median 10 ms, p99 50 ms), a number of milliseconds
    /// (fixed), `lognormal:MEDIAN,P99`. Every scenario runs at each. Default: every scenario
    /// at loopback, and ack-only and io-5ms at `sqs` too.
    #[arg(long, value_delimiter = ',', conflicts_with = "latency_ms")]
    pub(crate) latency: Vec<Latency>,

    /// A fixed latency added to every call, in milliseconds (the same as `--latency N`).
    #[arg(long, value_name = "N")]
    pub(crate) latency_ms: Option<f64>,

    /// Seed of the latency draws; each run starts from it, so every system draws the same
    /// latencies in the order its calls arrive.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub(crate) latency_seed: u64,

    /// Receive-and-delete loops of the raw ceiling at a latency. At the SQS-like 12.7 ms a
    /// call, one loop moves at most ten messages per two calls (about 390 a second), so it
    /// takes a hundred loops or more for the target, not the loops, to be the limit (the
    /// default's choice: `docs/benchmarks.md`, "The load test's own settings").
    #[arg(long, default_value_t = 128)]
    pub(crate) latency_ceiling_loops: usize,

    /// Scale of the message counts at a latency, relative to `--scale` (the slowest systems
    /// move some 600 messages a second there). The raw ceiling and sqs-engine (its native API
    /// and its broker) run eight times as many (`FAST_MESSAGES_AT_LATENCY`).
    #[arg(long, default_value_t = 0.25, value_parser = scenario::parse_scale)]
    pub(crate) latency_scale: f64,

    /// Scale of the message counts of the naive loop and ruststream-sqs-sns, relative to the
    /// others' (1.0: the same count). On a slow server they move a few hundred messages a
    /// second, and their rates and CPU per message are steady on fewer; at least ten.
    #[arg(long, default_value_t = 1.0, value_parser = scenario::parse_scale)]
    pub(crate) slow_scale: f64,

    /// Size of each message body, in bytes.
    #[arg(long, default_value_t = 200)]
    pub(crate) body_size: usize,

    /// Give up on one system's run after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub(crate) timeout_secs: u64,

    /// Write the JSON summary here (default: under the target directory).
    #[arg(long, value_name = "PATH")]
    pub(crate) json: Option<PathBuf>,

    /// Write the SVG plot here (default: under the target directory).
    #[arg(long, value_name = "PATH")]
    pub(crate) plot: Option<PathBuf>,
}

impl Default for CompareArgs {
    fn default() -> Self {
        Self {
            target: TargetKind::Embedded,
            endpoint: None,
            region: None,
            scenarios: Vec::new(),
            systems: Vec::new(),
            repetitions: 2,
            scale: None,
            workers: 64,
            receivers: None,
            ceiling_loops: 16,
            latency: Vec::new(),
            latency_ms: None,
            latency_seed: DEFAULT_SEED,
            latency_ceiling_loops: 128,
            latency_scale: 0.25,
            slow_scale: 1.0,
            body_size: 200,
            timeout_secs: 300,
            json: None,
            plot: None,
        }
    }
}

/// How the parent counts calls on the server side, for systems that cannot count their own.
pub(crate) enum ServerCalls {
    /// The embedded server's own counters.
    Embedded(EmbeddedSqs),
    /// LocalStack's log: one line `AWS sqs.<Action> =>` (or `AWS sns.<Action> =>`) per call.
    LocalstackLog(PathBuf),
    /// Not countable (any other endpoint).
    None,
}

impl ServerCalls {
    /// Where the counts come from, as text.
    fn source(&self) -> &'static str {
        match self {
            Self::Embedded(_) => "embedded server counters",
            Self::LocalstackLog(_) => "LocalStack log",
            Self::None => "none",
        }
    }

    /// A mark to count from: the embedded counters, or the log's length.
    pub(crate) fn mark(&self) -> Mark {
        match self {
            Self::Embedded(server) => Mark::Counts(
                server
                    .call_counts()
                    .into_iter()
                    .map(|(action, count)| (action.to_owned(), count))
                    .collect(),
            ),
            Self::LocalstackLog(path) => {
                Mark::Offset(std::fs::metadata(path).map_or(0, |meta| meta.len()))
            }
            Self::None => Mark::None,
        }
    }

    /// The consumer's calls since `mark`, by action; `None` when not countable. Sends are
    /// left out: they are the harness's (the light-load sender), not the consumer's.
    fn since(&self, mark: &Mark) -> Option<BTreeMap<String, u64>> {
        let mut calls = self.all_since(mark)?;
        calls.retain(|action, _| !action.starts_with("SendMessage"));
        Some(calls)
    }

    /// How old the messages of the queue at `queue_url` were when the server answered their
    /// deletes, from their send: only the embedded server knows.
    fn deleted_ages(&self, queue_url: &str) -> Option<Percentiles> {
        let Self::Embedded(server) = self else {
            return None;
        };
        server.deleted_ages(queue_url).map(|ages| Percentiles {
            count: ages.count,
            p50_ms: ages.p50_ms,
            p99_ms: ages.p99_ms,
            max_ms: ages.max_ms,
        })
    }

    /// Every call since `mark`, by action.
    pub(crate) fn all_since(&self, mark: &Mark) -> Option<BTreeMap<String, u64>> {
        match (self, mark) {
            (Self::Embedded(_), Mark::Counts(before)) => {
                let Mark::Counts(now) = self.mark() else {
                    return None;
                };
                Some(
                    now.into_iter()
                        .map(|(action, count)| {
                            let then = before.get(&action).copied().unwrap_or(0);
                            (action, count - then.min(count))
                        })
                        .filter(|(_, count)| *count > 0)
                        .collect(),
                )
            }
            (Self::LocalstackLog(path), Mark::Offset(offset)) => {
                count_log_calls(path, *offset).ok()
            }
            _ => None,
        }
    }
}

/// A point to count server-side calls from.
pub(crate) enum Mark {
    /// The embedded server's counters then.
    Counts(BTreeMap<String, u64>),
    /// The LocalStack log's length then.
    Offset(u64),
    /// Nothing to count.
    None,
}

/// The SQS calls in LocalStack's log after byte `offset`, by action.
fn count_log_calls(path: &Path, offset: u64) -> Result<BTreeMap<String, u64>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(count_log_text(&text))
}

/// The SQS and SNS calls in lines of LocalStack's log, by action.
fn count_log_text(text: &str) -> BTreeMap<String, u64> {
    let mut calls = BTreeMap::new();
    for line in text.lines() {
        let Some(at) = line.find("AWS sqs.").or_else(|| line.find("AWS sns.")) else {
            continue;
        };
        let rest = &line[at + "AWS sqs.".len()..];
        if let Some(end) = rest.find(" =>") {
            *calls.entry(rest[..end].to_owned()).or_insert(0) += 1;
        }
    }
    calls
}

/// The target of a comparison, started and ready.
pub(crate) struct Target {
    /// The endpoint every process talks to.
    pub(crate) endpoint: Option<String>,
    /// What it is, as text.
    pub(crate) name: String,
    /// Server-side call counting.
    pub(crate) calls: ServerCalls,
}

impl Target {
    /// Starts (or finds) the target the arguments name.
    pub(crate) async fn start(args: &CompareArgs) -> Result<Self> {
        if let Some(endpoint) = &args.endpoint {
            return Ok(Self {
                endpoint: Some(endpoint.clone()),
                name: format!("endpoint {endpoint}"),
                calls: ServerCalls::None,
            });
        }
        match args.target {
            TargetKind::Embedded => {
                let server = EmbeddedSqs::start("127.0.0.1:0".parse()?)?;
                Ok(Self {
                    endpoint: Some(server.endpoint().to_owned()),
                    name: "embedded".to_owned(),
                    calls: ServerCalls::Embedded(server),
                })
            }
            TargetKind::Localstack => {
                let script = |arg: &str| {
                    Command::new("bash")
                        .arg(LOCALSTACK_SCRIPT)
                        .arg(arg)
                        .output()
                };
                let up = script("status").is_ok_and(|out| out.status.success());
                if !up {
                    eprintln!("starting LocalStack with scripts/localstack.sh start ...");
                    let status = Command::new("bash")
                        .arg(LOCALSTACK_SCRIPT)
                        .arg("start")
                        .status()
                        .context("running scripts/localstack.sh start")?;
                    if !status.success() {
                        bail!("scripts/localstack.sh start failed");
                    }
                }
                let log = script("log")
                    .ok()
                    .filter(|out| out.status.success())
                    .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
                let calls = match log {
                    Some(path) if path.exists() => ServerCalls::LocalstackLog(path),
                    _ => {
                        warn!(
                            "LocalStack's log not found: the RustStream brokers' calls are not counted"
                        );
                        ServerCalls::None
                    }
                };
                Ok(Self {
                    endpoint: Some(localstack_endpoint()),
                    name: "localstack".to_owned(),
                    calls,
                })
            }
        }
    }

    /// Whether this is the embedded server.
    fn is_embedded(&self) -> bool {
        matches!(self.calls, ServerCalls::Embedded(_))
    }

    /// Sets the embedded server's latency (reseeding its draws); nothing elsewhere.
    fn set_latency(&self, latency: Latency, seed: u64) {
        if let ServerCalls::Embedded(server) = &self.calls {
            server.set_latency(latency, seed);
        }
    }
}

/// The directory reports go to by default: `$CARGO_TARGET_DIR/loadtest`, else the
/// workspace's `target/loadtest`.
pub(crate) fn output_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            manifest.parent().unwrap_or(manifest).join("target")
        });
    base.join("loadtest")
}

/// Runs a comparison: prints the table and the plot's path, writes the JSON summary.
///
/// # Errors
///
/// When the target cannot be started, a queue cannot be made or filled, or a child fails.
pub(crate) async fn run(args: CompareArgs) -> Result<()> {
    let comparison = compare(&args).await?;
    print!("{}", comparison.summary);
    finish(&args, &comparison, "compare")?;
    Ok(())
}

/// Writes the JSON summary and the plot of `comparison` where `args` say (or under
/// [`output_dir`], named after `stem` and the target), and prints where.
///
/// # Errors
///
/// When a file cannot be written.
pub(crate) fn finish(args: &CompareArgs, comparison: &Comparison, stem: &str) -> Result<()> {
    let dir = output_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = comparison.target.replace([' ', '/', ':'], "_");
    let plot_path = args
        .plot
        .clone()
        .unwrap_or_else(|| dir.join(format!("{stem}-{name}.svg")));
    std::fs::write(&plot_path, plot::svg(comparison))
        .with_context(|| format!("writing {}", plot_path.display()))?;
    let mut comparison = comparison.clone();
    comparison.plot = Some(plot_path.clone());
    let json_path = args
        .json
        .clone()
        .unwrap_or_else(|| dir.join(format!("{stem}-{name}.json")));
    crate::report::write_json(&json_path, &comparison)?;
    println!("plot: {}", plot_path.display());
    println!("json: {}", json_path.display());
    Ok(())
}

/// Runs every scenario and system, and aggregates.
///
/// # Errors
///
/// As for [`run`].
pub(crate) async fn compare(args: &CompareArgs) -> Result<Comparison> {
    let target = Target::start(args).await?;
    let scale = args
        .scale
        .unwrap_or(if target.is_embedded() { 1.0 } else { 0.25 });
    let kinds = if args.scenarios.is_empty() {
        ScenarioKind::ALL.to_vec()
    } else {
        args.scenarios.clone()
    };
    let systems = if args.systems.is_empty() {
        System::ALL.to_vec()
    } else {
        args.systems.clone()
    };
    let scenarios = plan(args, &kinds, scale, target.is_embedded())?;
    let target_args = TargetArgs {
        endpoint: target.endpoint.clone(),
        region: args.region.clone(),
    };
    let config = target_args.sdk_config_quietly().await;
    let client = Client::new(&config);
    eprintln!(
        "comparing {} on {} ({} repetition(s), {} workers)",
        systems
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", "),
        target.name,
        args.repetitions,
        args.workers
    );

    let mut runs = Vec::new();
    let mut handlers_alone = Vec::new();
    let run_id = std::process::id();
    for repetition in 0..args.repetitions {
        let mut order = systems.clone();
        if repetition % 2 == 1 {
            order.reverse();
        }
        for scenario in &scenarios {
            if handlers_alone::applies(scenario) {
                let (measured, workers) = (scenario.clone(), args.workers);
                let alone = tokio::task::spawn_blocking(move || {
                    handlers_alone::measure(&measured, workers)
                })
                .await
                .context("the handlers alone panicked")??;
                info!(
                    scenario = scenario.label(),
                    messages_per_sec = alone.messages_per_sec,
                    "handlers alone"
                );
                handlers_alone.push(alone);
            }
            for (position, system) in order.iter().enumerate() {
                if scenario.kind == ScenarioKind::Heartbeat && !system.has_heartbeat() {
                    continue;
                }
                if scenario.fifo_groups.is_some() && !system.runs_fifo() {
                    continue;
                }
                let queue = format!(
                    "lt-{run_id}-{}-{}-{}-{repetition}{}",
                    scenario.kind.name(),
                    scenario.latency.short(),
                    system.name(),
                    if scenario.fifo_groups.is_some() {
                        ".fifo"
                    } else {
                        ""
                    }
                );
                let queue_url = create_queue(&client, &queue).await?;
                let messages = scenario.messages_for(*system, args.slow_scale);
                if !scenario.light {
                    let filled = fill_queue(
                        client.clone(),
                        queue_url.clone(),
                        messages,
                        args.body_size,
                        16,
                        scenario.fifo_groups,
                    )
                    .await
                    .with_context(|| format!("filling {queue}"))?;
                    info!(queue, sent = filled.sent, "filled");
                }
                let job = Job {
                    system: *system,
                    endpoint: target.endpoint.clone(),
                    region: args.region.clone(),
                    queue_url: queue_url.clone(),
                    messages,
                    workers: args.workers,
                    receivers: args.receivers,
                    ceiling_loops: scenario.ceiling_loops,
                    behaviour: scenario.behaviour,
                    visibility_secs: scenario.visibility_secs,
                    light: scenario.light,
                    body_size: args.body_size,
                    timeout_secs: args.timeout_secs,
                    fifo_groups: scenario.fifo_groups,
                };
                let mark = target.calls.mark();
                let label = format!(
                    "{:<14} {:<19} rep {}",
                    scenario.label(),
                    system.name(),
                    repetition + 1
                );
                // The queue is made and filled at loopback; the system runs at the latency,
                // every run drawing from the same seed.
                target.set_latency(scenario.latency, args.latency_seed);
                let result = tokio::task::spawn_blocking(move || run_child(&job, &label)).await;
                target.set_latency(Latency::None, args.latency_seed);
                let result = result.context("the child's runner panicked")??;
                if !target.is_embedded() {
                    // LocalStack writes its log line after answering.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                let server_calls = target.calls.since(&mark);
                let e2e_settled = target.calls.deleted_ages(&queue_url);
                if let Err(error) = client.delete_queue().queue_url(&queue_url).send().await {
                    warn!(queue, error = %DisplayErrorContext(error), "deleting the queue failed");
                }
                runs.push(RunRecord {
                    scenario: scenario.kind,
                    latency: scenario.latency,
                    ceiling_loops: (*system == System::Ceiling).then_some(scenario.ceiling_loops),
                    repetition,
                    position,
                    result,
                    server_calls,
                    e2e_settled,
                });
            }
        }
    }
    let embedded = target.is_embedded();
    let summary = Summary::of(
        &scenarios,
        &systems,
        &runs,
        &handlers_alone,
        embedded,
        &target.name,
    );
    let server_calls_source = target.calls.source();
    if let ServerCalls::Embedded(server) = target.calls {
        server.shutdown().await?;
    }
    Ok(Comparison {
        target: target.name.clone(),
        embedded,
        server_calls_source,
        scenarios,
        latency_seed: args.latency_seed,
        workers: args.workers,
        repetitions: args.repetitions,
        runs,
        handlers_alone,
        summary,
        plot: None,
    })
}

/// The scenarios of `kinds` to run, each at its latency and sized, in run order: as
/// `--latency` (or `--latency-ms`) says, else every scenario at loopback, and ack-only and
/// io-5ms also at [`Latency::SQS`] right after (on the embedded server only: the only target
/// whose latency is set here).
///
/// # Errors
///
/// When a latency is asked for on another target than the embedded server.
fn plan(
    args: &CompareArgs,
    kinds: &[ScenarioKind],
    scale: f64,
    embedded: bool,
) -> Result<Vec<Scenario>> {
    let asked: Vec<Latency> = match args.latency_ms {
        Some(ms) => vec![format!("{ms}").parse().map_err(anyhow::Error::msg)?],
        None => args.latency.clone(),
    };
    if !embedded && asked.iter().any(|latency| !latency.is_none()) {
        bail!("--latency and --latency-ms need the embedded server (--target embedded)");
    }
    let cells: Vec<(ScenarioKind, Latency)> = if asked.is_empty() {
        // Each scenario at a latency right after itself at loopback, so that the two sit
        // side by side in the table and the plot.
        kinds
            .iter()
            .flat_map(|kind| {
                let at_latency =
                    embedded && matches!(kind, ScenarioKind::AckOnly | ScenarioKind::Io5ms);
                std::iter::once((*kind, Latency::None))
                    .chain(at_latency.then_some((*kind, Latency::SQS)))
            })
            .collect()
    } else {
        asked
            .iter()
            .flat_map(|latency| kinds.iter().map(|kind| (*kind, *latency)))
            .collect()
    };
    Ok(cells
        .into_iter()
        .map(|(kind, latency)| {
            if latency.is_none() {
                Scenario::sized(kind, scale, args.workers).at(latency, args.ceiling_loops)
            } else {
                Scenario::sized(kind, scale * args.latency_scale, args.workers)
                    .at(latency, args.latency_ceiling_loops)
            }
        })
        .collect())
}

/// Creates a queue named `name` (default attributes; a FIFO queue when the name ends in
/// `.fifo`) and returns its URL.
async fn create_queue(client: &Client, name: &str) -> Result<String> {
    let mut create = client.create_queue().queue_name(name);
    if name.ends_with(".fifo") {
        create = create.attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true");
    }
    let output = create
        .send()
        .await
        .map_err(|error| anyhow::anyhow!("CreateQueue {name}: {}", DisplayErrorContext(error)))?;
    output
        .queue_url
        .with_context(|| format!("CreateQueue {name} answered no URL"))
}

/// Runs `job` in a child process (this binary, `run-system`), showing its progress, and
/// returns what it measured.
fn run_child(job: &Job, label: &str) -> Result<ChildResult> {
    let exe = std::env::current_exe().context("finding this binary")?;
    let mut child = Command::new(exe)
        .arg("run-system")
        .arg("--job")
        .arg(serde_json::to_string(job)?)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting a child")?;
    let bar = crate::progress::bar(job.messages, label);
    let mut result = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line.context("reading the child's output")?;
            if let Some(count) = line.strip_prefix(child::PROGRESS) {
                if let Ok(count) = count.trim().parse() {
                    bar.set_position(count);
                }
            } else if let Some(json) = line.strip_prefix(child::RESULT) {
                result = Some(serde_json::from_str::<ChildResult>(json)?);
            }
        }
    }
    let status = child.wait().context("waiting for the child")?;
    bar.finish_and_clear();
    let result =
        result.with_context(|| format!("{label}: the child printed no result ({status})"))?;
    let rate = crate::report::per_sec(result.finished, result.elapsed_secs);
    eprintln!(
        "{label}: {} messages in {:.2} s ({rate:.0}/s){}",
        result.finished,
        result.elapsed_secs,
        if result.completed { "" } else { ", INCOMPLETE" }
    );
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn localstack_log_lines_count_by_action() {
        let log = "\
2026-11-30T10:45:04.340  INFO --- [t.reactor-34] localstack.request.aws     : AWS sqs.SendMessageBatch => 200
2026-11-30T10:45:04.342  INFO --- [t.reactor-21] localstack.request.aws     : AWS sqs.DeleteMessage => 200
something else
2026-11-30T10:45:04.351  INFO --- [t.reactor-27] localstack.request.aws     : AWS sqs.DeleteMessage => 400 (ReceiptHandleIsInvalid)
2026-11-30T10:45:04.352  INFO --- [t.reactor-28] localstack.request.aws     : AWS sns.PublishBatch => 200
";
        let calls = count_log_text(log);
        assert_eq!(calls.get("SendMessageBatch"), Some(&1));
        assert_eq!(calls.get("DeleteMessage"), Some(&2));
        assert_eq!(calls.get("PublishBatch"), Some(&1));
        assert_eq!(calls.len(), 3);
    }

    #[test]
    fn by_default_ack_only_and_io_5ms_also_run_at_the_sqs_like_latency_next_to_loopback() {
        let args = CompareArgs::default();
        let kinds = ScenarioKind::ALL.to_vec();
        let plan_of = |embedded| {
            plan(&args, &kinds, 1.0, embedded)
                .unwrap_or_default()
                .iter()
                .map(Scenario::label)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            plan_of(true),
            [
                "ack-only",
                "ack-only@sqs",
                "io-5ms",
                "io-5ms@sqs",
                "io-50ms",
                "mixed",
                "heartbeat",
                "light",
                "fifo"
            ]
        );
        assert_eq!(plan_of(false).len(), ScenarioKind::ALL.len());
        let planned = plan(&args, &kinds, 1.0, true).unwrap_or_default();
        let at_sqs = planned.iter().find(|s| !s.latency.is_none());
        assert_eq!(at_sqs.map(|s| s.messages), Some(5_000));
        assert_eq!(at_sqs.map(|s| s.ceiling_loops), Some(128));
        assert_eq!(planned[0].ceiling_loops, 16);
    }

    #[test]
    fn an_asked_latency_runs_every_scenario_and_needs_the_embedded_server() {
        let args = CompareArgs {
            latency_ms: Some(5.0),
            ..CompareArgs::default()
        };
        let kinds = [ScenarioKind::AckOnly, ScenarioKind::Mixed];
        let labels: Vec<String> = plan(&args, &kinds, 1.0, true)
            .unwrap_or_default()
            .iter()
            .map(Scenario::label)
            .collect();
        assert_eq!(labels, ["ack-only@5ms", "mixed@5ms"]);
        assert!(plan(&args, &kinds, 1.0, false).is_err());
    }
}
