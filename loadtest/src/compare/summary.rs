//! The aggregation of a comparison: one row per scenario and system (means over the
//! repetitions), ratios against the naive loop and the raw ceiling of the same run, the
//! product's goals, and the table printed at the end.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::handlers_alone::HandlersAlone;
use super::probe::Percentiles;
use super::record::RunRecord;
use super::scenario::{Scenario, ScenarioKind};
use super::system::System;
use crate::server::Latency;

/// Where a row's call counts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum CallsSource {
    /// The system counted its own calls.
    Own,
    /// The server counted them (the system cannot).
    Server,
    /// Nobody could.
    None,
}

/// Ratios of one row against a reference row of the same scenario.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Ratios {
    /// Messages per second, this ÷ reference (above 1: faster).
    pub(crate) messages_per_sec: Option<f64>,
    /// SQS calls per message, this ÷ reference (below 1: cheaper).
    pub(crate) calls_per_message: Option<f64>,
    /// CPU per message, this ÷ reference (below 1: cheaper).
    pub(crate) cpu_per_message: Option<f64>,
    /// Settlement latency p99, this ÷ reference.
    pub(crate) settlement_p99: Option<f64>,
    /// End-to-end latency p99 to handler start (send time to handler start), this ÷
    /// reference.
    pub(crate) e2e_p99: Option<f64>,
    /// End-to-end latency p99 to the settlement answered (send to the server's answer to the
    /// delete), this ÷ reference.
    pub(crate) e2e_settled_p99: Option<f64>,
}

/// One scenario and system, over every repetition.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    /// The scenario.
    pub(crate) scenario: ScenarioKind,
    /// The latency the embedded server added to every call.
    pub(crate) latency: Latency,
    /// The system.
    pub(crate) system: System,
    /// The raw ceiling's receive-and-delete loops (the ceiling only).
    pub(crate) ceiling_loops: Option<usize>,
    /// Runs aggregated.
    pub(crate) runs: usize,
    /// Whether every run finished its messages.
    pub(crate) completed: bool,
    /// Messages finished, all runs.
    pub(crate) messages: u64,
    /// Deliveries handled per message finished (above 1: redeliveries).
    pub(crate) deliveries_per_message: f64,
    /// Messages per second, mean of the runs (to the last settled message).
    pub(crate) messages_per_sec: f64,
    /// Messages per second of each run, in the order of the repetitions.
    pub(crate) messages_per_sec_by_run: Vec<f64>,
    /// SQS calls per message finished; `None` when not counted.
    pub(crate) calls_per_message: Option<f64>,
    /// SQS calls per message finished, by action.
    pub(crate) calls_per_message_by_action: BTreeMap<String, f64>,
    /// Where the calls were counted.
    pub(crate) calls_source: CallsSource,
    /// Consumer CPU seconds (user + system) per 1000 messages.
    pub(crate) cpu_secs_per_1000: f64,
    /// The largest peak RSS of the runs, in MiB.
    pub(crate) peak_rss_mib: f64,
    /// Settlement latency (handler return to SQS's answer), means of the runs' percentiles.
    pub(crate) settlement: Option<Percentiles>,
    /// Send time to handler start, means of the runs' percentiles.
    pub(crate) e2e: Option<Percentiles>,
    /// Send time to the server's answer to the message's delete (the settlement of an ack or
    /// a drop answered), means of the runs' percentiles; the embedded server only.
    pub(crate) e2e_settled: Option<Percentiles>,
    /// SendMessage round trips (light load only).
    pub(crate) round_trip: Option<Percentiles>,
    /// FIFO order violations the handlers saw, all runs (a message started while another of
    /// its group ran, or acked after a later one of its group); the FIFO scenario only.
    pub(crate) order_violations: Option<u64>,
    /// Against the naive loop of the same scenario.
    pub(crate) vs_naive: Ratios,
    /// Against the raw ceiling of the same scenario.
    pub(crate) vs_ceiling: Ratios,
    /// Messages per second against the raw ceiling's, repetition by repetition (each run
    /// against the ceiling's run of the same repetition, the two run one after the other);
    /// empty when their repetitions differ.
    pub(crate) vs_ceiling_by_run: Vec<f64>,
    /// Messages per second the scenario's handlers alone move, mean of the repetitions; only in
    /// the scenarios they bound (see [`super::handlers_alone`]).
    pub(crate) handlers_alone: Option<f64>,
    /// Messages per second ÷ the lower of the handlers alone and the raw ceiling: the share
    /// of what this run allowed at all; only where the handlers alone were measured.
    pub(crate) vs_bound: Option<f64>,
}

/// One of the product's goals, as measured in this run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Goal {
    /// What it is.
    pub(crate) name: String,
    /// What was measured; `None` when it could not be.
    pub(crate) measured: Option<f64>,
    /// The goal, as text (`<= 0.205`).
    pub(crate) goal: String,
    /// Whether it was met; `None` when not measured.
    pub(crate) met: Option<bool>,
    /// The same ratio repetition by repetition, where the measure is a ratio of runs made
    /// one after the other: how far one repetition's reading strays from the next's.
    pub(crate) by_run: Vec<f64>,
}

/// The rows and goals of a comparison.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    /// The target, as text.
    pub(crate) target: String,
    /// One row per scenario and system that ran.
    pub(crate) rows: Vec<Row>,
    /// The goals.
    pub(crate) goals: Vec<Goal>,
    /// For the systems that count their own calls, the calls the server counted ÷ theirs
    /// (all runs). Above 1, the server saw calls that were not theirs (another client of a
    /// shared LocalStack, say), and server-side counts (marked `*`) are too high by as much.
    pub(crate) server_over_own_calls: Option<f64>,
    /// ruststream-sqs-sns's CPU per message ÷ the raw ceiling's, ack-only: the most that any
    /// consumer sending the ceiling's calls through `aws-sdk-sqs` could measure against
    /// ruststream-sqs-sns in this run, since the ceiling does nothing but those calls.
    pub(crate) ruststream_over_ceiling_cpu: Option<f64>,
}

/// The mean of the values; `None` when there are none.
fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values
        .into_iter()
        .fold((0.0, 0_u32), |(sum, count), v| (sum + v, count + 1));
    (count > 0).then(|| sum / f64::from(count))
}

/// Means of the runs' percentiles (max: the largest).
fn mean_percentiles<'a>(all: impl Iterator<Item = &'a Percentiles> + Clone) -> Option<Percentiles> {
    Some(Percentiles {
        count: all.clone().map(|p| p.count).sum(),
        p50_ms: mean(all.clone().map(|p| p.p50_ms))?,
        p99_ms: mean(all.clone().map(|p| p.p99_ms))?,
        max_ms: all.map(|p| p.max_ms).fold(0.0, f64::max),
    })
}

/// `a ÷ b`, when both are there and `b` is not zero.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

impl Row {
    /// The row of `system` in `scenario` at `latency`, from its runs (none: `None`).
    fn of(
        scenario: ScenarioKind,
        latency: Latency,
        system: System,
        runs: &[&RunRecord],
    ) -> Option<Self> {
        if runs.is_empty() {
            return None;
        }
        let mut by_repetition = runs.to_vec();
        by_repetition.sort_by_key(|r| r.repetition);
        let messages_per_sec_by_run: Vec<f64> = by_repetition
            .iter()
            .map(|r| crate::report::per_sec(r.result.finished, r.result.elapsed_secs))
            .collect();
        let messages: u64 = runs.iter().map(|r| r.result.finished).sum();
        let deliveries: u64 = runs.iter().map(|r| r.result.deliveries).sum();
        let per_message = |count: u64| count as f64 / messages.max(1) as f64;
        let own = runs.iter().all(|r| r.result.calls.is_some());
        let server = runs.iter().all(|r| r.server_calls.is_some());
        let (calls_source, calls): (CallsSource, Option<BTreeMap<String, u64>>) = if own {
            (
                CallsSource::Own,
                Some(sum_calls(
                    runs.iter().filter_map(|r| r.result.calls.as_ref()),
                )),
            )
        } else if server {
            (
                CallsSource::Server,
                Some(sum_calls(
                    runs.iter().filter_map(|r| r.server_calls.as_ref()),
                )),
            )
        } else {
            (CallsSource::None, None)
        };
        let cpu: f64 = runs.iter().map(|r| r.result.cpu_secs).sum();
        let settlements: Vec<&Percentiles> = runs
            .iter()
            .filter_map(|r| r.result.settlement.as_ref())
            .collect();
        let e2es: Vec<&Percentiles> = runs.iter().filter_map(|r| r.result.e2e.as_ref()).collect();
        let e2es_settled: Vec<&Percentiles> =
            runs.iter().filter_map(|r| r.e2e_settled.as_ref()).collect();
        let trips: Vec<&Percentiles> = runs
            .iter()
            .filter_map(|r| r.result.round_trip.as_ref())
            .collect();
        Some(Self {
            scenario,
            latency,
            system,
            ceiling_loops: runs.iter().find_map(|r| r.ceiling_loops),
            runs: runs.len(),
            completed: runs.iter().all(|r| r.result.completed),
            messages,
            deliveries_per_message: per_message(deliveries),
            messages_per_sec: mean(messages_per_sec_by_run.iter().copied()).unwrap_or(0.0),
            messages_per_sec_by_run,
            calls_per_message: calls
                .as_ref()
                .map(|calls| per_message(calls.values().sum())),
            calls_per_message_by_action: calls
                .unwrap_or_default()
                .into_iter()
                .map(|(action, count)| (action, per_message(count)))
                .collect(),
            calls_source,
            cpu_secs_per_1000: cpu * 1000.0 / messages.max(1) as f64,
            peak_rss_mib: runs
                .iter()
                .map(|r| r.result.max_rss_kib as f64 / 1024.0)
                .fold(0.0, f64::max),
            settlement: mean_percentiles(settlements.iter().copied()),
            e2e: mean_percentiles(e2es.iter().copied()),
            e2e_settled: mean_percentiles(e2es_settled.iter().copied()),
            round_trip: mean_percentiles(trips.iter().copied()),
            order_violations: runs
                .iter()
                .filter_map(|r| r.result.order_violations)
                .reduce(|a, b| a + b),
            vs_naive: Ratios::default(),
            vs_ceiling: Ratios::default(),
            vs_ceiling_by_run: Vec::new(),
            handlers_alone: None,
            vs_bound: None,
        })
    }

    /// This row's ratios against `reference`.
    fn against(&self, reference: &Row) -> Ratios {
        Ratios {
            messages_per_sec: ratio(
                Some(self.messages_per_sec),
                Some(reference.messages_per_sec),
            ),
            calls_per_message: ratio(self.calls_per_message, reference.calls_per_message),
            cpu_per_message: ratio(
                Some(self.cpu_secs_per_1000),
                Some(reference.cpu_secs_per_1000),
            ),
            settlement_p99: ratio(
                self.settlement.map(|p| p.p99_ms),
                reference.settlement.map(|p| p.p99_ms),
            ),
            e2e_p99: ratio(self.e2e.map(|p| p.p99_ms), reference.e2e.map(|p| p.p99_ms)),
            e2e_settled_p99: ratio(
                self.e2e_settled.map(|p| p.p99_ms),
                reference.e2e_settled.map(|p| p.p99_ms),
            ),
        }
    }
}

/// `mine ÷ theirs`, run by run; empty when they ran a different number of times.
fn by_run(mine: &[f64], theirs: &[f64]) -> Vec<f64> {
    if mine.len() != theirs.len() {
        return Vec::new();
    }
    mine.iter()
        .zip(theirs)
        .filter_map(|(mine, theirs)| ratio(Some(*mine), Some(*theirs)))
        .collect()
}

/// The sum of call counts by action.
fn sum_calls<'a>(all: impl Iterator<Item = &'a BTreeMap<String, u64>>) -> BTreeMap<String, u64> {
    let mut total = BTreeMap::new();
    for calls in all {
        for (action, count) in calls {
            *total.entry(action.clone()).or_insert(0) += count;
        }
    }
    total
}

impl Summary {
    /// Aggregates `runs` of `systems` in `scenarios`, beside what their handlers alone moved,
    /// on the embedded server or not.
    pub(crate) fn of(
        scenarios: &[Scenario],
        systems: &[System],
        runs: &[RunRecord],
        handlers_alone: &[HandlersAlone],
        embedded: bool,
        target: &str,
    ) -> Self {
        let mut rows = Vec::new();
        for scenario in scenarios {
            let mut scenario_rows: Vec<Row> = systems
                .iter()
                .filter_map(|system| {
                    let of_system: Vec<&RunRecord> = runs
                        .iter()
                        .filter(|r| {
                            r.scenario == scenario.kind
                                && r.latency == scenario.latency
                                && r.result.system == *system
                        })
                        .collect();
                    Row::of(scenario.kind, scenario.latency, *system, &of_system)
                })
                .collect();
            let naive = scenario_rows
                .iter()
                .find(|r| r.system == System::Naive)
                .cloned();
            let ceiling = scenario_rows
                .iter()
                .find(|r| r.system == System::Ceiling)
                .cloned();
            let alone = mean(
                handlers_alone
                    .iter()
                    .filter(|h| h.scenario == scenario.kind && h.latency == scenario.latency)
                    .map(|h| h.messages_per_sec),
            );
            let bound = match (alone, &ceiling) {
                (Some(alone), Some(ceiling)) => Some(alone.min(ceiling.messages_per_sec)),
                (alone, _) => alone,
            };
            for row in &mut scenario_rows {
                if let Some(naive) = &naive {
                    row.vs_naive = row.against(naive);
                }
                if let Some(ceiling) = &ceiling {
                    row.vs_ceiling = row.against(ceiling);
                    row.vs_ceiling_by_run = by_run(
                        &row.messages_per_sec_by_run,
                        &ceiling.messages_per_sec_by_run,
                    );
                }
                row.handlers_alone = alone;
                row.vs_bound = ratio(Some(row.messages_per_sec), bound);
            }
            rows.extend(scenario_rows);
        }
        let goals = goals(&rows, embedded);
        let cpu_of = |system| {
            rows.iter()
                .find(|r| {
                    r.scenario == ScenarioKind::AckOnly && r.latency.is_none() && r.system == system
                })
                .map(|r| r.cpu_secs_per_1000)
        };
        let ruststream_over_ceiling_cpu =
            ratio(cpu_of(System::RuststreamSqsSns), cpu_of(System::Ceiling));
        let (server, own) = runs
            .iter()
            .filter_map(|r| Some((r.server_calls.as_ref()?, r.result.calls.as_ref()?)))
            .fold((0_u64, 0_u64), |(server, own), (s, o)| {
                (
                    server + s.values().sum::<u64>(),
                    own + o.values().sum::<u64>(),
                )
            });
        Self {
            target: target.to_owned(),
            rows,
            goals,
            server_over_own_calls: (own > 0).then(|| server as f64 / own as f64),
            ruststream_over_ceiling_cpu,
        }
    }

    /// The row of `system` in `scenario` at loopback, if it ran.
    pub(crate) fn row(&self, scenario: ScenarioKind, system: System) -> Option<&Row> {
        self.row_at(scenario, Latency::None, system)
    }

    /// The row of `system` in `scenario` at `latency`, if it ran.
    pub(crate) fn row_at(
        &self,
        scenario: ScenarioKind,
        latency: Latency,
        system: System,
    ) -> Option<&Row> {
        self.rows.iter().find(|r| {
            r.scenario == scenario
                && r.system == system
                && (r.latency == latency || (r.latency.is_none() && latency.is_none()))
        })
    }
}

/// A goal: `measured` against `limit`, met when `at_most` says which side is good.
fn goal(name: &str, measured: Option<f64>, limit: f64, at_most: bool) -> Goal {
    Goal {
        name: name.to_owned(),
        measured,
        goal: format!("{} {limit}", if at_most { "<=" } else { ">=" }),
        met: measured.map(|m| if at_most { m <= limit } else { m >= limit }),
        by_run: Vec::new(),
    }
}

/// `goal`, with the ratio repetition by repetition beside it.
fn goal_by_run(name: &str, measured: Option<f64>, limit: f64, by_run: &[f64]) -> Goal {
    Goal {
        by_run: by_run.to_vec(),
        ..goal(name, measured, limit, false)
    }
}

/// The product's goals, as this run measured them.
fn goals(rows: &[Row], embedded: bool) -> Vec<Goal> {
    let find = |scenario, system| {
        rows.iter()
            .find(|r| r.scenario == scenario && r.latency.is_none() && r.system == system)
    };
    let engine = find(ScenarioKind::AckOnly, System::SqsEngine);
    let ruststream = find(ScenarioKind::AckOnly, System::RuststreamSqsSns);
    let mut goals = vec![goal(
        "sqs-engine SQS calls per message, ack-only full load",
        engine.and_then(|r| r.calls_per_message),
        0.205,
        true,
    )];
    let by_run = engine.map_or(&[][..], |r| &r.vs_ceiling_by_run);
    goals.push(if embedded {
        goal_by_run(
            "sqs-engine messages/s / raw ceiling's, ack-only, embedded server",
            engine.and_then(|r| r.vs_ceiling.messages_per_sec),
            0.8,
            by_run,
        )
    } else {
        goal_by_run(
            "sqs-engine messages/s / raw ceiling's, ack-only",
            engine.and_then(|r| r.vs_ceiling.messages_per_sec),
            0.9,
            by_run,
        )
    });
    goals.push(goal(
        "ruststream-sqs-sns CPU per message / sqs-engine's, ack-only",
        ratio(
            ruststream.map(|r| r.cpu_secs_per_1000),
            engine.map(|r| r.cpu_secs_per_1000),
        ),
        5.0,
        false,
    ));
    if let Some(fifo) = find(ScenarioKind::Fifo, System::SqsEngine) {
        goals.push(goal(
            "sqs-engine order violations, fifo",
            fifo.order_violations.map(|v| v as f64),
            0.0,
            true,
        ));
    }
    goals.extend(latency_goals(rows));
    let light = find(ScenarioKind::Light, System::SqsEngine);
    goals.push(goal(
        "sqs-engine settlement p99 minus SendMessage round trip p99 (ms), light load",
        light.and_then(|r| Some(r.settlement?.p99_ms - r.round_trip?.p99_ms)),
        2.0,
        true,
    ));
    goals
}

/// The goals at each latency the run had: ack-only against the raw ceiling and the naive
/// loop (at a latency; loopback's are above), and io-5ms against what its handlers alone
/// allow (everywhere).
fn latency_goals(rows: &[Row]) -> Vec<Goal> {
    let engine = |scenario| {
        rows.iter()
            .filter(move |r| r.scenario == scenario && r.system == System::SqsEngine)
    };
    let at = |row: &Row| {
        if row.latency.is_none() {
            String::new()
        } else {
            format!(" @{}", row.latency.short())
        }
    };
    let mut goals = Vec::new();
    for row in engine(ScenarioKind::AckOnly).filter(|r| !r.latency.is_none()) {
        goals.push(goal_by_run(
            &format!("sqs-engine messages/s / raw ceiling's, ack-only{}", at(row)),
            row.vs_ceiling.messages_per_sec,
            0.8,
            &row.vs_ceiling_by_run,
        ));
        goals.push(goal(
            &format!("sqs-engine messages/s / naive loop's, ack-only{}", at(row)),
            row.vs_naive.messages_per_sec,
            3.0,
            false,
        ));
    }
    for row in engine(ScenarioKind::Io5ms) {
        goals.push(goal(
            &format!(
                "sqs-engine messages/s / min(handlers alone, raw ceiling), io-5ms{}",
                at(row)
            ),
            row.vs_bound,
            0.8,
            false,
        ));
    }
    goals
}

/// A row's scenario with its latency: `ack-only`, `ack-only@sqs`.
fn scenario_label(row: &Row) -> String {
    if row.latency.is_none() {
        row.scenario.name().to_owned()
    } else {
        format!("{}@{}", row.scenario.name(), row.latency.short())
    }
}

/// A row's system, with the raw ceiling's loops: `ceiling x256`.
fn system_label(row: &Row) -> String {
    match row.ceiling_loops {
        Some(loops) => format!("{} x{loops}", row.system.name()),
        None => row.system.name().to_owned(),
    }
}

/// A number with `digits` decimals, or `n/a`.
fn num(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.digits$}"))
}

/// A ratio as `1.23x`, or `-`.
fn times(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}x"))
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "comparison on {}", self.target)?;
        writeln!(
            f,
            "{:<14} {:<18} {:>9} {:>7} {:>7} {:>7} {:>10} {:>7} {:>9} {:>7} {:>7} {:>22} {:>20} {:>20} {:>6}",
            "scenario",
            "system",
            "msg/s",
            "xnaive",
            "xceil",
            "xbound",
            "calls/msg",
            "xnaive",
            "cpu s/1k",
            "xnaive",
            "rss MiB",
            "settle p50/p99/max ms",
            "send>handler p50/p99",
            "send>settled p50/p99",
            "order!"
        )?;
        for row in &self.rows {
            let settle = row.settlement.map_or_else(
                || "n/a".to_owned(),
                |p| format!("{:.2}/{:.2}/{:.1}", p.p50_ms, p.p99_ms, p.max_ms),
            );
            let e2e = row.e2e.map_or_else(
                || "n/a".to_owned(),
                |p| format!("{:.1}/{:.1}", p.p50_ms, p.p99_ms),
            );
            let e2e_settled = row.e2e_settled.map_or_else(
                || "n/a".to_owned(),
                |p| format!("{:.1}/{:.1}", p.p50_ms, p.p99_ms),
            );
            let calls = match row.calls_source {
                CallsSource::Server => format!("{}*", num(row.calls_per_message, 3)),
                _ => num(row.calls_per_message, 3),
            };
            // Light load's rate is the harness's send-wait cycle, not a throughput.
            let light = row.scenario == ScenarioKind::Light;
            let rate = if light {
                "-".to_owned()
            } else {
                format!("{:.0}", row.messages_per_sec)
            };
            let rate_ratio = |ratio: Option<f64>| if light { "-".to_owned() } else { times(ratio) };
            writeln!(
                f,
                "{:<14} {:<18} {:>9} {:>7} {:>7} {:>7} {:>10} {:>7} {:>9.3} {:>7} {:>7.1} {:>22} {:>20} {:>20} {:>6}{}",
                scenario_label(row),
                system_label(row),
                rate,
                rate_ratio(row.vs_naive.messages_per_sec),
                rate_ratio(row.vs_ceiling.messages_per_sec),
                rate_ratio(row.vs_bound),
                calls,
                times(row.vs_naive.calls_per_message),
                row.cpu_secs_per_1000,
                times(row.vs_naive.cpu_per_message),
                row.peak_rss_mib,
                settle,
                e2e,
                e2e_settled,
                row.order_violations
                    .map_or_else(|| "-".to_owned(), |v| v.to_string()),
                if row.completed { "" } else { "  INCOMPLETE" }
            )?;
        }
        writeln!(
            f,
            "* counted by the server (the system cannot count its calls). x: ratio to the naive \
             loop / raw ceiling of the same scenario and latency in this run; more ratios in the \
             JSON. ceiling xN: its receive-and-delete loops. At a latency, the ceiling and \
             sqs-engine (native and broker) run {}x the scenario's messages (long enough to pass their ramp-up).",
            super::FAST_MESSAGES_AT_LATENCY
        )?;
        let mut bounded: Vec<(String, f64)> = Vec::new();
        for row in &self.rows {
            if let Some(alone) = row.handlers_alone {
                let label = scenario_label(row);
                if !bounded.iter().any(|(l, _)| *l == label) {
                    bounded.push((label, alone));
                }
            }
        }
        for (label, alone) in bounded {
            writeln!(
                f,
                "xbound, {label}: ratio to the lower of the raw ceiling and the scenario's \
                 handlers alone ({alone:.0} msg/s here: the same handlers, as many at once, no \
                 SQS; a timer's sleep outlasts its nominal wait)."
            )?;
        }
        let latencies: Vec<Latency> = self.rows.iter().fold(Vec::new(), |mut all, row| {
            if !row.latency.is_none() && !all.contains(&row.latency) {
                all.push(row.latency);
            }
            all
        });
        for latency in latencies {
            writeln!(
                f,
                "@{}: the embedded server added {} to every call (mean {:.1} ms), as a region's \
                 SQS takes; the other rows are at loopback.",
                latency.short(),
                latency.label(),
                latency.mean_ms()
            )?;
        }
        writeln!(
            f,
            "settle: handler return to SQS's answer (the two RustStream brokers: to the \
             and_after continuation). send>handler: send time (from the body) to handler start, \
             in the consumer. send>settled: the server's SendMessage to its answer to the \
             message's delete (an ack or drop settled), measured by the embedded server (n/a \
             elsewhere). All latencies in ms."
        )?;
        if self.rows.iter().any(|r| r.order_violations.is_some()) {
            writeln!(
                f,
                "order!: fifo only (a FIFO queue, {} groups, messages interleaved across them): \
                 messages started while another of their group ran, plus messages acked after \
                 a later one of their group, all runs; 0 keeps every group's order. \
                 ruststream-sqs-sns mounts with keyed workers (workers_by_key), sqs-engine's \
                 broker with plain ones (its groups keep their order without lanes). The naive \
                 loop and the raw ceiling sit it out (the ceiling has no handler).",
                super::scenario::FIFO_GROUPS
            )?;
        }
        if let Some(excess) = self.server_over_own_calls.filter(|e| *e > 1.02) {
            writeln!(
                f,
                "WARNING: the server counted {excess:.2}x the calls the self-counting systems \
                 made: another client shares it, and the * counts are inflated accordingly."
            )?;
        }
        for row in self.rows.iter().filter(|r| r.round_trip.is_some()) {
            if let Some(trip) = row.round_trip {
                writeln!(
                    f,
                    "light load, {}: SendMessage round trip p50/p99 {:.2}/{:.2} ms",
                    row.system.name(),
                    trip.p50_ms,
                    trip.p99_ms
                )?;
            }
        }
        writeln!(f, "goals")?;
        for goal in &self.goals {
            let verdict = match goal.met {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "not measured",
            };
            write!(
                f,
                "  {:<78} {:>8} (goal {}) {verdict}",
                goal.name,
                num(goal.measured, 3),
                goal.goal
            )?;
            if goal.by_run.len() > 1 {
                let each: Vec<String> = goal.by_run.iter().map(|r| format!("{r:.3}")).collect();
                write!(f, "; by repetition {}", each.join(", "))?;
            }
            writeln!(f)?;
        }
        if let Some(bound) = self.ruststream_over_ceiling_cpu {
            writeln!(
                f,
                "  (for the CPU goal: ruststream-sqs-sns CPU per message / the raw ceiling's is {bound:.3}, \
                 the most any consumer calling through aws-sdk-sqs could measure in this run)"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::job::ChildResult;

    /// A run of `system` in ack-only at loopback, repetition `repetition`, that finished 1,000
    /// messages at `rate` a second.
    fn run(system: System, repetition: u32, rate: f64) -> RunRecord {
        RunRecord {
            scenario: ScenarioKind::AckOnly,
            latency: Latency::None,
            ceiling_loops: None,
            repetition,
            position: 0,
            result: ChildResult {
                system,
                completed: true,
                finished: 1_000,
                deliveries: 1_000,
                elapsed_secs: 1_000.0 / rate,
                cpu_secs: 0.05,
                max_rss_kib: 20_000,
                calls: None,
                settlement: None,
                e2e: None,
                round_trip: None,
                timeline: Vec::new(),
                order_violations: None,
            },
            server_calls: None,
            e2e_settled: None,
        }
    }

    #[test]
    fn the_ceiling_goal_shows_each_repetitions_ratio_beside_the_mean_ones() {
        let scenario = Scenario::sized(ScenarioKind::AckOnly, 1.0, 64);
        let systems = [System::SqsEngine, System::Ceiling];
        // Recorded out of order: the second repetition first.
        let runs = [
            run(System::Ceiling, 1, 20_000.0),
            run(System::SqsEngine, 1, 18_000.0),
            run(System::SqsEngine, 0, 15_000.0),
            run(System::Ceiling, 0, 25_000.0),
        ];
        let summary = Summary::of(&[scenario], &systems, &runs, &[], true, "embedded");
        let engine = summary
            .row(ScenarioKind::AckOnly, System::SqsEngine)
            .expect("the engine's row");
        assert_eq!(engine.messages_per_sec_by_run, vec![15_000.0, 18_000.0]);
        assert_eq!(engine.vs_ceiling_by_run, vec![0.6, 0.9]);
        let goal = summary
            .goals
            .iter()
            .find(|g| g.name.starts_with("sqs-engine messages/s / raw ceiling's"))
            .expect("the ceiling goal");
        assert_eq!(goal.by_run, vec![0.6, 0.9]);
        // The mean rates' ratio, 16,500 / 22,500, misses the goal of 0.8.
        assert_eq!(goal.met, Some(false));
        let printed = summary.to_string();
        let line = printed
            .lines()
            .find(|l| l.contains("raw ceiling's, ack-only, embedded server"))
            .expect("the goal's line");
        assert!(
            line.ends_with("MISSED; by repetition 0.600, 0.900"),
            "{line}"
        );
    }

    #[test]
    fn runs_of_unequal_repetitions_have_no_ratio_by_run() {
        assert!(by_run(&[1.0, 2.0], &[1.0]).is_empty());
        assert_eq!(by_run(&[1.0, 3.0], &[2.0, 0.0]), vec![0.5]);
    }
}
