//! What a load-test run reports: serializable report types, a plain-text table for the
//! terminal, and the JSON file writer.

use std::fmt;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use sqs_engine::{Count, Stats};

use crate::behaviour::Behaviour;

/// Successes and failures of one kind of event, as reported.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct CountReport {
    /// How many succeeded.
    pub(crate) ok: u64,
    /// How many failed.
    pub(crate) failed: u64,
}

impl From<Count> for CountReport {
    fn from(count: Count) -> Self {
        Self {
            ok: count.ok,
            failed: count.failed,
        }
    }
}

impl fmt::Display for CountReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.failed == 0 {
            write!(f, "{}", self.ok)
        } else {
            write!(f, "{} ({} failed)", self.ok, self.failed)
        }
    }
}

/// The result of a `fill` run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FillReport {
    /// The queue as given.
    pub(crate) queue: String,
    /// The queue's URL.
    pub(crate) queue_url: String,
    /// The explicit endpoint, if any.
    pub(crate) endpoint: Option<String>,
    /// Messages asked for.
    pub(crate) messages_requested: u64,
    /// Messages SQS accepted.
    pub(crate) messages_sent: u64,
    /// Size of each message body, in bytes.
    pub(crate) body_bytes: usize,
    /// Messages per `SendMessageBatch` call.
    pub(crate) batch_size: usize,
    /// `SendMessageBatch` calls in flight at once.
    pub(crate) concurrency: usize,
    /// `SendMessageBatch` calls made, resends included.
    pub(crate) send_message_batch_calls: u64,
    /// Entries SQS refused and that were sent again.
    pub(crate) entries_resent: u64,
    /// Wall-clock time of the sends, in seconds.
    pub(crate) elapsed_secs: f64,
    /// Messages sent per second.
    pub(crate) messages_per_sec: f64,
}

impl fmt::Display for FillReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut table = Table::new(format!("fill {}", self.queue));
        table.row("queue url", &self.queue_url);
        table.row(
            "endpoint",
            self.endpoint.as_deref().unwrap_or("(SDK default)"),
        );
        table.row(
            "body / batch / concurrency",
            format!(
                "{} B / {} / {}",
                self.body_bytes, self.batch_size, self.concurrency
            ),
        );
        table.section("result");
        table.row(
            "messages sent",
            format!("{} of {}", self.messages_sent, self.messages_requested),
        );
        table.row("seconds", format!("{:.3}", self.elapsed_secs));
        table.row("messages/s", format!("{:.1}", self.messages_per_sec));
        table.row("SendMessageBatch calls", self.send_message_batch_calls);
        table.row("entries resent", self.entries_resent);
        table.fmt(f)
    }
}

/// Why a `consume` run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StopReason {
    /// The handler saw the target number of messages.
    Completed,
    /// The timeout passed first.
    TimedOut,
    /// Ctrl-C.
    Interrupted,
    /// The engine returned without being asked to stop.
    EngineStopped,
}

impl StopReason {
    /// A short, stable name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::TimedOut => "timed_out",
            Self::Interrupted => "interrupted",
            Self::EngineStopped => "engine_stopped",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Settlements answered by SQS, by outcome.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct SettledReport {
    /// `ack` settlements.
    pub(crate) ack: CountReport,
    /// `drop` settlements.
    pub(crate) drop: CountReport,
    /// `retry` settlements (including messages returned at shutdown).
    pub(crate) retry: CountReport,
    /// `retry_after` settlements.
    pub(crate) retry_after: CountReport,
    /// Settlements that took effect, every outcome.
    pub(crate) ok: u64,
    /// Settlements that failed, every outcome.
    pub(crate) failed: u64,
}

/// SQS calls the engine made, by action.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct CallsReport {
    /// `ReceiveMessage`.
    pub(crate) receive_message: CountReport,
    /// `DeleteMessageBatch`.
    pub(crate) delete_message_batch: CountReport,
    /// `ChangeMessageVisibilityBatch`.
    pub(crate) change_message_visibility_batch: CountReport,
    /// `GetQueueUrl`.
    pub(crate) get_queue_url: CountReport,
    /// `GetQueueAttributes`.
    pub(crate) get_queue_attributes: CountReport,
    /// `SetQueueAttributes`.
    pub(crate) set_queue_attributes: CountReport,
    /// Every call, failed ones included.
    pub(crate) total: u64,
}

impl CallsReport {
    /// The calls of an engine's counters.
    fn of(stats: &Stats) -> Self {
        Self {
            receive_message: stats.receive_message.into(),
            delete_message_batch: stats.delete_message_batch.into(),
            change_message_visibility_batch: stats.change_message_visibility_batch.into(),
            get_queue_url: stats.get_queue_url.into(),
            get_queue_attributes: stats.get_queue_attributes.into(),
            set_queue_attributes: stats.set_queue_attributes.into(),
            total: stats.total_calls(),
        }
    }

    /// The actions with their names, in a fixed order.
    fn by_action(&self) -> [(&'static str, CountReport); 6] {
        [
            ("ReceiveMessage", self.receive_message),
            ("DeleteMessageBatch", self.delete_message_batch),
            (
                "ChangeMessageVisibilityBatch",
                self.change_message_visibility_batch,
            ),
            ("GetQueueUrl", self.get_queue_url),
            ("GetQueueAttributes", self.get_queue_attributes),
            ("SetQueueAttributes", self.set_queue_attributes),
        ]
    }
}

/// How a `consume` run was set up.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ConsumeSetup {
    /// The queue as given (name or URL).
    pub(crate) queue: String,
    /// The explicit endpoint, if any.
    pub(crate) endpoint: Option<String>,
    /// Handler invocations at once.
    pub(crate) workers: usize,
    /// The most long-poll receivers, when set (else the engine's default).
    pub(crate) receivers: Option<usize>,
    /// Sleep in the handler before each outcome, in milliseconds.
    pub(crate) handler_delay_ms: u64,
    /// What the handler does with each message.
    pub(crate) behaviour: Behaviour,
    /// The visibility timeout asked for, in seconds; `None` for the queue's own.
    pub(crate) visibility_secs: Option<u64>,
    /// The redrive policy's maxReceiveCount, if any.
    pub(crate) max_attempts: Option<u32>,
    /// The dead-letter queue, if any.
    pub(crate) dead_letter: Option<String>,
    /// Messages to finish (ack or drop) before stopping.
    pub(crate) messages_target: u64,
    /// Seconds after which the run gives up.
    pub(crate) timeout_secs: u64,
}

/// The result of a `consume` run, from the engine's own counters.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ConsumeReport {
    /// How the run was set up.
    #[serde(flatten)]
    pub(crate) setup: ConsumeSetup,
    /// Why it stopped.
    pub(crate) stop_reason: StopReason,
    /// Whether the engine's graceful shutdown finished. When it did not, it was abandoned
    /// and the counts are what the engine had recorded by then.
    pub(crate) shutdown_complete: bool,
    /// Deliveries the engine received (a message received twice counts twice).
    pub(crate) deliveries_received: u64,
    /// Handler invocations that finished.
    pub(crate) handled: u64,
    /// Settlements answered, by outcome.
    pub(crate) settled: SettledReport,
    /// Settlements applied after the message's visibility deadline.
    pub(crate) late_settlements: u64,
    /// Deliveries dropped without an outcome.
    pub(crate) unsettled: u64,
    /// Entries sent in `DeleteMessageBatch` calls, resends included.
    pub(crate) delete_entries: u64,
    /// Entries sent in `ChangeMessageVisibilityBatch` calls, resends included.
    pub(crate) visibility_entries: u64,
    /// SQS calls, by action.
    pub(crate) calls: CallsReport,
    /// SQS calls per message finished (acked or dropped); `None` when none was.
    pub(crate) calls_per_message: Option<f64>,
    /// Wall-clock time from the start of the engine to the end of its shutdown, in seconds.
    pub(crate) elapsed_secs: f64,
    /// Time from the stop signal to the end of the engine's shutdown, in seconds.
    pub(crate) shutdown_secs: f64,
    /// Messages finished (acked or dropped) per second of `elapsed_secs`.
    pub(crate) messages_per_sec: f64,
}

/// How long a `consume` run took.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// Seconds from the start of the engine to the end of its shutdown.
    pub(crate) elapsed_secs: f64,
    /// Seconds from the stop signal to the end of the engine's shutdown.
    pub(crate) shutdown_secs: f64,
}

impl ConsumeReport {
    /// The report of a run with `setup` that stopped for `stop_reason` after `handled`
    /// handler invocations, with the engine's final counters `stats`.
    ///
    /// Rates and calls per message count finished messages (acked or dropped): retry_after
    /// settlements bring a message back, and the `retry` settlements are the messages the
    /// engine returned at shutdown.
    pub(crate) fn new(
        setup: ConsumeSetup,
        stop_reason: StopReason,
        shutdown_complete: bool,
        handled: u64,
        stats: &Stats,
        timing: Timing,
    ) -> Self {
        let finished = stats.acked.ok + stats.dropped.ok;
        let calls = CallsReport::of(stats);
        Self {
            setup,
            stop_reason,
            shutdown_complete,
            deliveries_received: stats.messages_received,
            handled,
            settled: SettledReport {
                ack: stats.acked.into(),
                drop: stats.dropped.into(),
                retry: stats.retried.into(),
                retry_after: stats.retried_after.into(),
                ok: stats.settled_ok(),
                failed: stats.settled_failed(),
            },
            late_settlements: stats.late_settlements,
            unsettled: stats.unsettled,
            delete_entries: stats.delete_entries,
            visibility_entries: stats.visibility_entries,
            calls,
            calls_per_message: (finished > 0).then(|| calls.total as f64 / finished as f64),
            elapsed_secs: timing.elapsed_secs,
            shutdown_secs: timing.shutdown_secs,
            messages_per_sec: per_sec(finished, timing.elapsed_secs),
        }
    }
}

impl fmt::Display for ConsumeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let setup = &self.setup;
        let mut table = Table::new(format!("consume {}", setup.queue));
        table.row(
            "endpoint",
            setup.endpoint.as_deref().unwrap_or("(SDK default)"),
        );
        table.row(
            "workers / receivers",
            format!(
                "{} / {}",
                setup.workers,
                setup
                    .receivers
                    .map_or_else(|| "default".to_owned(), |r| r.to_string())
            ),
        );
        table.row("handler delay", format!("{} ms", setup.handler_delay_ms));
        let behaviour = &setup.behaviour;
        if behaviour.retry_after_share > 0.0 {
            table.row(
                "retry_after share",
                format!(
                    "{} (after {} s)",
                    behaviour.retry_after_share,
                    behaviour.retry_after.as_secs()
                ),
            );
        }
        if behaviour.drop_share > 0.0 {
            table.row("drop share", behaviour.drop_share);
        }
        if behaviour.slow_share > 0.0 {
            table.row(
                "slow share",
                format!(
                    "{} (+{} ms)",
                    behaviour.slow_share,
                    behaviour.slow.as_millis()
                ),
            );
        }
        if let Some(secs) = setup.visibility_secs {
            table.row("visibility timeout", format!("{secs} s"));
        }
        if let (Some(max_attempts), Some(dead_letter)) = (setup.max_attempts, &setup.dead_letter) {
            table.row(
                "redrive",
                format!("{max_attempts} receives, then {dead_letter}"),
            );
        }
        table.row("target messages", setup.messages_target);

        table.section("result");
        table.row("stop reason", self.stop_reason);
        if !self.shutdown_complete {
            table.row("shutdown", "abandoned (did not finish in time)");
        }
        table.row("deliveries received", self.deliveries_received);
        table.row("handled", self.handled);
        table.row("settled ack", self.settled.ack);
        table.row("settled drop", self.settled.drop);
        table.row("settled retry", self.settled.retry);
        table.row("settled retry_after", self.settled.retry_after);
        table.row("late settlements", self.late_settlements);
        table.row("unsettled", self.unsettled);
        table.row("seconds", format!("{:.3}", self.elapsed_secs));
        table.row("  of which shutdown", format!("{:.3}", self.shutdown_secs));
        table.row(
            "messages/s (acked or dropped)",
            format!("{:.1}", self.messages_per_sec),
        );

        table.section("SQS calls");
        for (action, count) in self.calls.by_action() {
            if count.ok + count.failed > 0 {
                table.row(action, count);
            }
        }
        table.row("total", self.calls.total);
        table.row(
            "calls per finished message",
            self.calls_per_message
                .map_or_else(|| "n/a".to_owned(), |calls| format!("{calls:.3}")),
        );
        table.row(
            "entries per delete call",
            ratio(self.delete_entries, self.calls.delete_message_batch),
        );
        if self.visibility_entries > 0 {
            table.row(
                "entries per visibility call",
                ratio(
                    self.visibility_entries,
                    self.calls.change_message_visibility_batch,
                ),
            );
        }
        table.fmt(f)
    }
}

/// `count` per second over `secs`; zero when no time passed.
pub(crate) fn per_sec(count: u64, secs: f64) -> f64 {
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

/// `entries` per call of `calls`, as text.
fn ratio(entries: u64, calls: CountReport) -> String {
    let calls = calls.ok + calls.failed;
    if calls == 0 {
        "n/a".to_owned()
    } else {
        format!("{:.2}", entries as f64 / calls as f64)
    }
}

/// Writes `report` as pretty-printed JSON to `path`.
///
/// # Errors
///
/// When the file cannot be created or written.
pub(crate) fn write_json(path: &Path, report: &impl Serialize) -> Result<()> {
    let mut text = serde_json::to_string_pretty(report).context("serializing the report")?;
    text.push('\n');
    std::fs::write(path, text)
        .with_context(|| format!("writing the JSON report to {}", path.display()))
}

/// A two-column table of labels and values, in titled sections, for the terminal.
#[derive(Debug)]
struct Table {
    /// The heading line.
    title: String,
    /// The lines, in order.
    rows: Vec<Row>,
}

/// One line of a [`Table`].
#[derive(Debug)]
enum Row {
    /// A section heading.
    Section(String),
    /// A label and its value.
    Pair(String, String),
}

impl Table {
    /// An empty table headed `title`.
    fn new(title: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            rows: Vec::new(),
        }
    }

    /// Starts a section headed `name`.
    fn section(&mut self, name: impl Into<String>) {
        self.rows.push(Row::Section(name.into()));
    }

    /// Adds a line with `label` and `value`.
    fn row(&mut self, label: impl Into<String>, value: impl fmt::Display) {
        self.rows.push(Row::Pair(label.into(), value.to_string()));
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .rows
            .iter()
            .filter_map(|row| match row {
                Row::Pair(label, _) => Some(label.len()),
                Row::Section(_) => None,
            })
            .max()
            .unwrap_or(0);
        writeln!(f, "{}", self.title)?;
        for row in &self.rows {
            match row {
                Row::Section(name) => writeln!(f, "-- {name}")?,
                Row::Pair(label, value) => writeln!(f, "  {label:<width$}  {value}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_aligns_its_values() {
        let mut table = Table::new("t");
        table.row("a", 1);
        table.section("s");
        table.row("longer", "x");
        assert_eq!(table.to_string(), "t\n  a       1\n-- s\n  longer  x\n");
    }

    #[test]
    fn rates_of_no_time_are_zero() {
        assert!((per_sec(10, 2.0) - 5.0).abs() < f64::EPSILON);
        assert!(per_sec(10, 0.0).abs() < f64::EPSILON);
    }

    #[test]
    fn a_count_shows_its_failures_only_when_there_are_some() {
        assert_eq!(CountReport { ok: 3, failed: 0 }.to_string(), "3");
        assert_eq!(CountReport { ok: 3, failed: 2 }.to_string(), "3 (2 failed)");
    }
}
