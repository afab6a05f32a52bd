//! The trace of a run: the workload, then one line per event and per change SQS applied, in
//! order, each with the time on tokio's clock. Its hash tells two runs of a seed apart; on a
//! failure it goes to a file under the target directory.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use sqs_engine::testing::{Applied, Change};

use crate::record::{Answer, Event};
use crate::run::Run;

/// The trace of `run`, as text.
pub fn render(run: &Run) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "{:?}", run.workload);
    let start = run.start;
    let mut applied = run.journal.iter().enumerate().peekable();
    for stamped in &run.events {
        while let Some((position, change)) =
            applied.next_if(|(position, _)| *position < stamped.journal)
        {
            write_applied(&mut text, start, position, change);
        }
        let _ = writeln!(text, "{} {}", clock(stamped.at), describe(&stamped.event));
    }
    for (position, change) in applied {
        write_applied(&mut text, start, position, change);
    }
    for (consumer, stopped) in run.stopped.iter().enumerate() {
        let _ = writeln!(
            text,
            "consumer {consumer} returned at {}",
            clock(stopped.at)
        );
    }
    let _ = writeln!(text, "remaining {:?}", run.remaining);
    let _ = writeln!(text, "dead-lettered {:?}", run.dead_lettered);
    text
}

fn clock(at: Duration) -> String {
    format!("{:>12.3}s", at.as_secs_f64())
}

fn describe_change(change: &Change) -> String {
    match change {
        Change::Sent { group_id } => format!("sent group={group_id:?}"),
        Change::Received {
            receipt_handle,
            receive_count,
            visibility,
            duplicate,
        } => {
            let again = if *duplicate {
                " (a duplicate: handed out again in flight)"
            } else {
                ""
            };
            format!("received #{receive_count} as {receipt_handle}, hidden {visibility}s{again}")
        }
        Change::Deleted {
            receipt_handle,
            removed,
        } => format!("deleted by {receipt_handle} removed={removed}"),
        Change::VisibilityChanged {
            receipt_handle,
            seconds,
        } => format!("visibility {seconds}s by {receipt_handle}"),
        Change::DeadLettered { dead_letter } => format!("moved to {dead_letter}"),
        Change::QueueDeleted => "gone with its queue".to_owned(),
        other => format!("{other:?}"),
    }
}

/// Writes the line of the change SQS applied at journal `position`, timed from `start`.
fn write_applied(
    text: &mut String,
    start: tokio::time::Instant,
    position: usize,
    change: &Applied,
) {
    let at = change.at.saturating_duration_since(start);
    let _ = writeln!(
        text,
        "{} sqs#{position} {} {} {}",
        clock(at),
        change.queue,
        change.message_id,
        describe_change(&change.change)
    );
}

fn describe(event: &Event) -> String {
    match event {
        Event::Call(made) => {
            let head = format!("c{} call#{} {:?}", made.consumer, made.call, made.action);
            match &made.attempt {
                Some(attempt) => format!("{head} attempt {attempt}"),
                None => format!("{head} {:?}", made.entries),
            }
        }
        Event::Faulted {
            consumer,
            call,
            fault,
        } => format!("c{consumer} call#{call} fault {fault:?}"),
        Event::Answered {
            consumer,
            call,
            applied,
            answer,
            in_flight,
        } => {
            let answer = match answer {
                Answer::Received(messages) => format!("received {messages:?}"),
                Answer::Entries(entries) => format!("entries {entries:?}"),
                Answer::Failed(error) => format!("failed: {error}"),
            };
            let held = in_flight
                .as_ref()
                .map(|(receipts, held)| {
                    format!(" (sqs in flight {}, engine holds {held})", receipts.len())
                })
                .unwrap_or_default();
            format!(
                "c{consumer} call#{call} answered, sqs#{}..{}: {answer}{held}",
                applied.0, applied.1
            )
        }
        Event::Started {
            consumer,
            message_id,
            receive_count,
        } => format!("c{consumer} handler starts {message_id} #{receive_count}"),
        Event::Ended {
            consumer,
            message_id,
            receive_count,
            end,
        } => format!("c{consumer} handler ends {message_id} #{receive_count}: {end:?}"),
        Event::ShutdownSignalled { consumer } => format!("c{consumer} shutdown signalled"),
        Event::LetGo {
            consumer,
            message_id,
            receive_count,
        } => format!("c{consumer} lets go of {message_id} #{receive_count} unsettled"),
        Event::AppliedLate {
            consumer,
            call,
            applied,
        } => format!(
            "c{consumer} call#{call} applied late, sqs#{}..{}",
            applied.0, applied.1
        ),
        Event::Stopped { consumer, detail } => format!("c{consumer} stopped: {detail}"),
        Event::QueueDeleted => "the queue was deleted".to_owned(),
        Event::SettleFailed {
            consumer,
            message_id,
            receive_count,
            error,
        } => format!("c{consumer} settlement of {message_id} #{receive_count} failed: {error}"),
    }
}

/// A hash of `trace` that is the same from one build and platform to the next (FNV-1a).
pub fn hash(trace: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in trace.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Writes the trace of `seed` to a file under the target directory; returns its path.
pub fn write(seed: u64, label: &str, trace: &str) -> PathBuf {
    let directory = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("simulation");
    let _ = std::fs::create_dir_all(&directory);
    let path = directory.join(format!("seed-{seed}{label}.trace"));
    if let Err(error) = std::fs::write(&path, trace) {
        eprintln!("could not write the trace to {}: {error}", path.display());
    }
    path
}
