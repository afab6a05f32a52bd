//! The table each scenario prints.

use std::fmt::Write as _;
use std::time::Duration;

/// One scenario's result.
#[derive(Debug, Clone, Default)]
pub struct Row {
    /// The scenario's name.
    pub scenario: String,
    /// Messages sent.
    pub messages: usize,
    /// Messages processed at least once, by every consumer together.
    pub processed: usize,
    /// Messages sent and neither processed nor still on the queue.
    pub lost: usize,
    /// Processings beyond the first.
    pub duplicates: u64,
    /// From the fault to every message processed (or the queue back to its expected state).
    pub recovery: Option<Duration>,
    /// SQS calls that failed and were retried, every consumer together.
    pub calls_retried: u64,
    /// Anything else worth a line: shutdown time, peaks, RSS.
    pub notes: String,
}

/// The table of `rows`, with a header, as printed.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| {:<26} | {:>8} | {:>9} | {:>4} | {:>10} | {:>10} | {:>13} | notes",
        "scenario", "messages", "processed", "lost", "duplicates", "recovery", "calls retried"
    );
    let _ = writeln!(
        out,
        "|{:-<28}|{:->10}|{:->11}|{:->6}|{:->12}|{:->12}|{:->15}|------",
        "", "", "", "", "", "", ""
    );
    for row in rows {
        let recovery = row
            .recovery
            .map_or_else(|| "-".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()));
        let _ = writeln!(
            out,
            "| {:<26} | {:>8} | {:>9} | {:>4} | {:>10} | {:>10} | {:>13} | {}",
            row.scenario,
            row.messages,
            row.processed,
            row.lost,
            row.duplicates,
            recovery,
            row.calls_retried,
            row.notes
        );
    }
    out
}

/// Prints the table of `rows` to stdout (`cargo test -- --nocapture` shows it; a failing test
/// shows it anyway).
pub fn print(rows: &[Row]) {
    println!("\n{}", table(rows));
}
