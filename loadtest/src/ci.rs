//! `loadtest ci`: a short comparison, ack-only at full load on the embedded server and on
//! LocalStack, that fails when sqs-engine misses its gates in that same run:
//!
//! - its SQS calls per message exceed [`MAX_CALLS_PER_MESSAGE`] (on either target);
//! - its CPU per message is not below the naive loop's and ruststream-sqs-sns's (on either
//!   target);
//! - its messages/s on LocalStack are below [`MIN_CEILING_SHARE`] of the raw ceiling's;
//! - its SQS calls per message exceed [`MAX_CALLS_PER_MESSAGE`] on the embedded server at
//!   [`Latency::SQS`] (the round trips of SQS in a region, see [`crate::server::Latency`]);
//! - its RustStream broker's messages/s there are below [`MIN_BROKER_SHARE`] of its native
//!   API's in the same run (the median of the repetitions' ratios, each repetition running
//!   both).
//!
//! - it breaks a FIFO group's order (a message started while another of its group ran, or
//!   acked after a later one of its group) in a short fifo run on the embedded server.
//!
//! - its broker makes more calls per payment (SQS and SNS in total), or more SNS calls per
//!   payment, than ruststream-sqs-sns in the same short `seed-payments --fan-out` run on the
//!   embedded server (each payment published to a topic that fans out to two queues), or
//!   either broker leaves payments unhandled.
//!
//! At that latency it also reports, without gating on them, sqs-engine's messages/s as a
//! share of the raw ceiling's and of the naive loop's, with the engine's default receivers
//! (at loopback both run 16 long polls).
//!
//! It prints the JSON summary and keeps it (and the plots) under the target directory.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::compare::{
    CompareArgs, ScenarioKind, Summary, System, TargetKind, compare, finish, output_dir,
};
use crate::seed::{Measured, SeedArgs};
use crate::server::Latency;

/// The most SQS calls per message sqs-engine may make, ack-only at full load.
pub(crate) const MAX_CALLS_PER_MESSAGE: f64 = 0.21;

/// The least share of the raw ceiling's messages/s sqs-engine must reach on LocalStack.
pub(crate) const MIN_CEILING_SHARE: f64 = 0.8;

/// The least share of sqs-engine's native messages/s its RustStream broker must reach,
/// ack-only at [`Latency::SQS`]: the broker is an adapter over the same engine.
pub(crate) const MIN_BROKER_SHARE: f64 = 0.8;

/// Options of `loadtest ci`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CiArgs {
    /// Messages per run on the embedded server.
    #[arg(long, default_value_t = 5000)]
    embedded_messages: u64,

    /// Messages per run on LocalStack.
    #[arg(long, default_value_t = 6000)]
    localstack_messages: u64,

    /// Repetitions on the embedded server at loopback (the order of the systems alternates,
    /// so an even number runs each order as often).
    #[arg(long, default_value_t = 4)]
    repetitions: u32,

    /// Repetitions on LocalStack. Its throughput gate is a ratio of two rates measured on one
    /// machine, which one repetition alone reads with much noise (see `docs/benchmarks.md`,
    /// "The load test's own settings"): the gate takes the whole run's rates.
    #[arg(long, default_value_t = 8)]
    localstack_repetitions: u32,

    /// Messages per run on the embedded server at the SQS-like latency.
    #[arg(long, default_value_t = 5000)]
    latency_messages: u64,

    /// Repetitions on the embedded server at the SQS-like latency. The broker's gate there
    /// compares two rates of about a second a run, which one pair alone reads with much noise
    /// (see `docs/benchmarks.md`, "The load test's own settings"), so it takes the median of
    /// twelve runs' ratios (even, so each order of the systems runs as often).
    #[arg(long, default_value_t = 12)]
    latency_repetitions: u32,

    /// Skip the runs at the SQS-like latency.
    #[arg(long)]
    no_latency: bool,

    /// Messages of the fifo run (sqs-engine only, on the embedded server); 0 skips it.
    #[arg(long, default_value_t = 1000)]
    fifo_messages: u64,

    /// Payments of each broker's fan-out run (`seed-payments --fan-out`, on the embedded
    /// server, twice with the order reversed); 0 skips it.
    #[arg(long, default_value_t = 2000)]
    fan_out_payments: u64,

    /// Skip LocalStack (the throughput gate is then not checked).
    #[arg(long)]
    embedded_only: bool,

    /// Write the JSON summary here (default: `ci.json` under the target directory).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

/// One gate's verdict.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Gate {
    /// What is checked.
    pub(crate) name: String,
    /// What was measured, as text.
    pub(crate) measured: String,
    /// Whether it passed (always, when not gated).
    pub(crate) passed: bool,
    /// Whether the gate fails on it; `false`: reported only.
    pub(crate) gated: bool,
}

/// What `loadtest ci` prints and keeps.
#[derive(Debug, Clone, Serialize)]
struct CiSummary {
    /// Whether every gate passed.
    passed: bool,
    /// The gates.
    gates: Vec<Gate>,
    /// The summaries of each target.
    targets: Vec<Summary>,
}

/// The gates of one target's summary.
pub(crate) fn gates(summary: &Summary, localstack: bool) -> Vec<Gate> {
    let row = |system| summary.row(ScenarioKind::AckOnly, system);
    let engine = row(System::SqsEngine);
    let mut gates = Vec::new();
    let target = &summary.target;
    let calls = engine.and_then(|r| r.calls_per_message);
    gates.push(Gate {
        name: format!("{target}: sqs-engine calls/message <= {MAX_CALLS_PER_MESSAGE}"),
        measured: calls.map_or_else(|| "n/a".to_owned(), |c| format!("{c:.4}")),
        passed: calls.is_some_and(|c| c <= MAX_CALLS_PER_MESSAGE),
        gated: true,
    });
    for other in [System::Naive, System::RuststreamSqsSns] {
        let mine = engine.map(|r| r.cpu_secs_per_1000);
        let theirs = row(other).map(|r| r.cpu_secs_per_1000);
        gates.push(Gate {
            name: format!("{target}: sqs-engine CPU/message below {}'s", other.name()),
            measured: match (mine, theirs) {
                (Some(mine), Some(theirs)) => {
                    format!("{mine:.4} vs {theirs:.4} CPU s per 1000 messages")
                }
                _ => "n/a".to_owned(),
            },
            passed: matches!((mine, theirs), (Some(mine), Some(theirs)) if mine < theirs),
            gated: true,
        });
    }
    if localstack {
        let share = engine.and_then(|r| r.vs_ceiling.messages_per_sec);
        gates.push(Gate {
            name: format!(
                "{target}: sqs-engine messages/s >= {MIN_CEILING_SHARE} of the raw ceiling's"
            ),
            measured: share.map_or_else(|| "n/a".to_owned(), |s| format!("{s:.3}")),
            passed: share.is_some_and(|s| s >= MIN_CEILING_SHARE),
            gated: true,
        });
    }
    gates
}

/// The gates of the embedded server's summary at `latency`: calls per message and the
/// broker's messages/s against the native API's gated; the messages/s against the raw ceiling
/// and the naive loop reported only.
pub(crate) fn latency_gates(summary: &Summary, latency: Latency) -> Vec<Gate> {
    let row = |system| summary.row_at(ScenarioKind::AckOnly, latency, system);
    let engine = row(System::SqsEngine);
    let at = format!("{} @{}", summary.target, latency.short());
    let calls = engine.and_then(|r| r.calls_per_message);
    let mut gates = vec![
        Gate {
            name: format!("{at}: sqs-engine calls/message <= {MAX_CALLS_PER_MESSAGE}"),
            measured: calls.map_or_else(|| "n/a".to_owned(), |c| format!("{c:.4}")),
            passed: calls.is_some_and(|c| c <= MAX_CALLS_PER_MESSAGE),
            gated: true,
        },
        broker_gate(
            &at,
            engine
                .filter(|r| r.completed)
                .map(|r| r.messages_per_sec_by_run.as_slice()),
            row(System::SqsEngineBroker)
                .filter(|r| r.completed)
                .map(|r| r.messages_per_sec_by_run.as_slice()),
        ),
    ];
    for (other, share) in [
        (
            System::Ceiling,
            engine.and_then(|r| r.vs_ceiling.messages_per_sec),
        ),
        (
            System::Naive,
            engine.and_then(|r| r.vs_naive.messages_per_sec),
        ),
    ] {
        let rates = engine.zip(row(other)).map_or_else(
            || "n/a".to_owned(),
            |(mine, theirs)| {
                format!(
                    "{:.0} vs {:.0} msg/s",
                    mine.messages_per_sec, theirs.messages_per_sec
                )
            },
        );
        gates.push(Gate {
            name: format!(
                "{at}: sqs-engine messages/s / {}'s (reported, not gated)",
                other.name()
            ),
            measured: share.map_or_else(|| "n/a".to_owned(), |s| format!("{s:.3} ({rates})")),
            passed: true,
            gated: false,
        });
    }
    gates
}

/// The gate of the broker's messages/s against the native API's, from their rates run by run
/// (`None`: the system did not run, or did not finish its messages). Each repetition runs
/// both systems one after the other, so its two rates are a pair; the gate takes the median of
/// the pairs' ratios, so that one slow run of either system does not decide it.
pub(crate) fn broker_gate(at: &str, native: Option<&[f64]>, broker: Option<&[f64]>) -> Gate {
    let ratios: Vec<f64> = native
        .zip(broker)
        .filter(|(native, broker)| native.len() == broker.len())
        .map(|(native, broker)| {
            native
                .iter()
                .zip(broker)
                .filter(|(native, _)| **native > 0.0)
                .map(|(native, broker)| broker / native)
                .collect()
        })
        .unwrap_or_default();
    let share = median(&ratios);
    Gate {
        name: format!(
            "{at}: sqs-engine broker messages/s >= {MIN_BROKER_SHARE} of the native API's \
             (median of the runs' ratios)"
        ),
        measured: match share {
            Some(share) => {
                let each: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
                format!("{share:.3} (runs {})", each.join(", "))
            }
            None => "n/a (a system did not run or did not finish)".to_owned(),
        },
        passed: share.is_some_and(|share| share >= MIN_BROKER_SHARE),
        gated: true,
    }
}

/// The median of `values` (the mean of the middle two of an even count); `None` when empty.
fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => Some(sorted[middle]),
        _ => Some(f64::midpoint(sorted[middle - 1], sorted[middle])),
    }
}

/// The gate of the fifo run: sqs-engine finished its messages with no order violation.
pub(crate) fn fifo_gate(summary: &Summary) -> Gate {
    let engine = summary.row(ScenarioKind::Fifo, System::SqsEngine);
    let violations = engine.and_then(|r| r.order_violations);
    let completed = engine.is_some_and(|r| r.completed);
    Gate {
        name: format!("{}: sqs-engine FIFO order violations = 0", summary.target),
        measured: match violations {
            Some(v) if completed => v.to_string(),
            Some(v) => format!("{v} (INCOMPLETE run)"),
            None => "n/a".to_owned(),
        },
        passed: completed && violations == Some(0),
        gated: true,
    }
}

/// The gates of the fan-out run: sqs-engine's broker makes no more calls per payment, in total
/// and of SNS, than ruststream-sqs-sns in the same run, and every run completed.
pub(crate) fn fan_out_gates(measured: &Measured) -> Vec<Gate> {
    ["calls per payment (total)", "SNS calls per payment"]
        .into_iter()
        .map(|name| {
            let figure = measured.summary.iter().find(|figure| figure.name == name);
            let ratio = figure.and_then(|figure| figure.ratio);
            let show = |value: Option<f64>| value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.3}"));
            Gate {
                name: format!(
                    "embedded, seed-payments --fan-out: sqs-engine {name} / ruststream-sqs-sns's <= 1"
                ),
                measured: format!(
                    "{} ({} / {}){}",
                    show(ratio),
                    show(figure.and_then(|figure| figure.sqs_engine)),
                    show(figure.and_then(|figure| figure.sqs_sns)),
                    if measured.completed { "" } else { ", INCOMPLETE run" }
                ),
                passed: measured.completed && ratio.is_some_and(|ratio| ratio <= 1.0),
                gated: true,
            }
        })
        .collect()
}

/// One ack-only comparison of the gate: a target, at a latency.
#[derive(Debug, Clone, Copy, PartialEq)]
struct GatedRun {
    target: TargetKind,
    latency: Latency,
    messages: u64,
    repetitions: u32,
}

impl GatedRun {
    /// The gate's comparisons, in order: the embedded server at loopback, then at the SQS-like
    /// latency, then LocalStack (each but the first as `args` asks).
    fn all(args: &CiArgs) -> Vec<Self> {
        let embedded = |latency, messages, repetitions| Self {
            target: TargetKind::Embedded,
            latency,
            messages,
            repetitions,
        };
        let mut runs = vec![embedded(
            Latency::None,
            args.embedded_messages,
            args.repetitions,
        )];
        if !args.no_latency {
            runs.push(embedded(
                Latency::SQS,
                args.latency_messages,
                args.latency_repetitions,
            ));
        }
        if !args.embedded_only {
            runs.push(Self {
                target: TargetKind::Localstack,
                latency: Latency::None,
                messages: args.localstack_messages,
                repetitions: args.localstack_repetitions,
            });
        }
        runs
    }

    /// The comparison's arguments.
    fn compare_args(self) -> CompareArgs {
        CompareArgs {
            target: self.target,
            endpoint: None,
            scenarios: vec![ScenarioKind::AckOnly],
            repetitions: self.repetitions,
            scale: Some(self.messages as f64 / 20_000.0),
            latency: vec![self.latency],
            latency_scale: 1.0,
            timeout_secs: 120,
            // At loopback, as many long polls in flight as the raw ceiling has loops (16), so
            // that on a slow server (LocalStack) both are compared at the same receive
            // concurrency. At a latency, the engine's defaults, as a user runs it, against the
            // ceiling's many loops.
            receivers: self.latency.is_none().then_some(16),
            // The naive loop and ruststream-sqs-sns are slow on LocalStack and at a latency: a
            // quarter of the count measures their rate and CPU as well, in a quarter of the
            // time (docs/benchmarks.md, "The load test's own settings").
            slow_scale: if self.target == TargetKind::Localstack {
                0.25
            } else if self.latency.is_none() {
                1.0
            } else {
                0.25
            },
            ..CompareArgs::default()
        }
    }
}

/// Runs the gate: prints the table of each target, then the JSON summary.
///
/// # Errors
///
/// When a comparison fails to run, the summary cannot be written, or a gate fails.
pub(crate) async fn run(args: CiArgs) -> Result<()> {
    let mut all_gates = Vec::new();
    let mut summaries = Vec::new();
    for gated in GatedRun::all(&args) {
        let (target, latency) = (gated.target, gated.latency);
        let compare_args = gated.compare_args();
        let comparison = compare(&compare_args).await?;
        eprint!("{}", comparison.summary);
        let stem = if latency.is_none() {
            "ci".to_owned()
        } else {
            format!("ci-{}", latency.short())
        };
        finish(&compare_args, &comparison, &stem)?;
        if latency.is_none() {
            all_gates.extend(gates(&comparison.summary, target == TargetKind::Localstack));
        } else {
            all_gates.extend(latency_gates(&comparison.summary, latency));
        }
        summaries.push(comparison.summary);
    }
    if args.fifo_messages > 0 {
        let compare_args = CompareArgs {
            scenarios: vec![ScenarioKind::Fifo],
            systems: vec![System::SqsEngine],
            repetitions: 1,
            scale: Some(args.fifo_messages as f64 / 2_000.0),
            timeout_secs: 120,
            ..CompareArgs::default()
        };
        let comparison = compare(&compare_args).await?;
        eprint!("{}", comparison.summary);
        finish(&compare_args, &comparison, "ci-fifo")?;
        all_gates.push(fifo_gate(&comparison.summary));
        summaries.push(comparison.summary);
    }
    if args.fan_out_payments > 0 {
        let seed_args = SeedArgs::fan_out(
            args.fan_out_payments,
            2,
            output_dir().join("ci-seed-payments-fan-out.json"),
        );
        all_gates.extend(fan_out_gates(&crate::seed::measure(seed_args).await?));
    }
    let summary = CiSummary {
        passed: all_gates.iter().all(|g| g.passed),
        gates: all_gates,
        targets: summaries,
    };
    let path = args.json.unwrap_or_else(|| output_dir().join("ci.json"));
    crate::report::write_json(&path, &summary)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", serde_json::to_string_pretty(&summary)?)
        .context("printing the summary")?;
    for gate in &summary.gates {
        writeln!(
            stdout,
            "{} {} ({})",
            match (gate.gated, gate.passed) {
                (false, _) => "INFO",
                (true, true) => "PASS",
                (true, false) => "FAIL",
            },
            gate.name,
            gate.measured
        )?;
    }
    writeln!(stdout, "summary: {}", path.display())?;
    if !summary.passed {
        bail!("the load-test gate failed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seed::Figure;

    fn measured(total: (f64, f64), sns: (f64, f64), completed: bool) -> Measured {
        let figure = |name: &str, (engine, peer): (f64, f64)| Figure {
            name: name.to_owned(),
            sqs_engine: Some(engine),
            sqs_sns: Some(peer),
            ratio: Some(engine / peer),
        };
        Measured {
            summary: vec![
                figure("calls per payment (total)", total),
                figure("SNS calls per payment", sns),
            ],
            completed,
        }
    }

    #[test]
    fn the_broker_gate_passes_at_four_fifths_of_the_native_rate_and_only_with_both_rates() {
        let passed = |native: Option<&[f64]>, broker: Option<&[f64]>| {
            broker_gate("embedded @sqs", native, broker).passed
        };
        assert!(passed(Some(&[10_000.0]), Some(&[8_000.0])));
        assert!(passed(Some(&[10_000.0]), Some(&[12_000.0])));
        assert!(!passed(Some(&[10_000.0]), Some(&[7_999.0])));
        assert!(!passed(None, Some(&[8_000.0])), "no native rate");
        assert!(!passed(Some(&[10_000.0]), None), "no broker rate");
        assert!(!passed(Some(&[0.0]), Some(&[0.0])), "nothing moved");
        assert!(!passed(Some(&[]), Some(&[])), "no runs");
        assert!(
            !passed(Some(&[10_000.0, 10_000.0]), Some(&[9_000.0])),
            "runs that do not pair up"
        );
        let gate = broker_gate("embedded @sqs", Some(&[10_000.0]), Some(&[3_000.0]));
        assert!(gate.gated);
        assert_eq!(gate.measured, "0.300 (runs 0.300)");
    }

    #[test]
    fn the_broker_gate_takes_the_median_of_the_runs_ratios() {
        // One slow broker run among four does not fail the gate; slow runs in three of them do.
        let native = [35_000.0, 36_000.0, 34_000.0, 35_000.0];
        let gate = broker_gate(
            "embedded @sqs",
            Some(&native),
            Some(&[21_000.0, 33_000.0, 34_000.0, 35_000.0]),
        );
        assert!(gate.passed, "{}", gate.measured);
        assert_eq!(gate.measured, "0.958 (runs 0.600, 0.917, 1.000, 1.000)");
        let gate = broker_gate(
            "embedded @sqs",
            Some(&native),
            Some(&[21_000.0, 21_600.0, 27_200.0, 35_000.0]),
        );
        assert!(!gate.passed, "{}", gate.measured);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn the_fan_out_gates_pass_at_no_more_calls_than_the_peer_and_only_on_complete_runs() {
        let passed = |m: &Measured| {
            fan_out_gates(m)
                .iter()
                .map(|g| g.passed)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            passed(&measured((0.8, 4.3), (0.14, 1.0), true)),
            [true, true]
        );
        assert_eq!(
            passed(&measured((4.4, 4.3), (0.14, 1.0), true)),
            [false, true]
        );
        assert_eq!(
            passed(&measured((0.8, 4.3), (1.2, 1.0), true)),
            [true, false]
        );
        assert_eq!(
            passed(&measured((0.8, 4.3), (0.14, 1.0), false)),
            [false, false]
        );
        assert!(
            fan_out_gates(&Measured {
                summary: Vec::new(),
                completed: true
            })
            .iter()
            .all(|gate| !gate.passed && gate.gated)
        );
    }

    /// `loadtest ci` parsed from `args`.
    fn ci_args(args: &[&str]) -> CiArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            ci: CiArgs,
        }
        let all = std::iter::once("ci").chain(args.iter().copied());
        <Cli as clap::Parser>::parse_from(all).ci
    }

    #[test]
    fn each_gated_run_holds_the_engine_and_the_slow_systems_to_its_target() {
        use Latency as L;
        use TargetKind::{Embedded, Localstack};
        let runs = GatedRun::all(&ci_args(&[]));
        let shape: Vec<_> = runs
            .iter()
            .map(|run| {
                let compare = run.compare_args();
                (
                    run.target,
                    run.latency,
                    compare.receivers,
                    compare.slow_scale,
                    compare.scale,
                    compare.repetitions,
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                (Embedded, L::None, Some(16), 1.0, Some(0.25), 4),
                (Embedded, L::SQS, None, 0.25, Some(0.25), 12),
                (Localstack, L::None, Some(16), 0.25, Some(0.3), 8),
            ],
            "the ceiling's 16 long polls at loopback; the engine's defaults, twelve runs and a \
             quarter of the slow systems' messages at a latency; a quarter of the slow systems' \
             messages and twice the repetitions on LocalStack"
        );
        let fewer = GatedRun::all(&ci_args(&["--no-latency", "--embedded-only"]));
        assert_eq!(fewer.len(), 1);
        assert_eq!(fewer[0].latency, Latency::None);
    }
}
