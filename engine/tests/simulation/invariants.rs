//! What every run must show, checked from the in-process SQS's journal (what it applied) and
//! from what the harness saw at the edges (calls, answers, handler calls), never from the
//! engine's word alone:
//!
//! - every message sent ends deleted once, dead-lettered, or still on the queue: none lost;
//! - every message SQS removed was deleted on a handler's ack or drop;
//! - a message whose delete SQS applied is never handled again by the consumer that deleted it
//!   (another consumer may still hold a copy from an earlier receive);
//! - a `retry_after(d)` message is not received again before `d` (or its 12-hour clamp);
//! - a FIFO group's messages start in order, each once the ones before it are gone;
//! - a consumer never holds more than its `max_held` messages;
//! - a message whose handler panicked is let go: no extension keeps it hidden after the calls
//!   under way then;
//! - shutdown returns within its timeout plus the flush budget, and every settlement a
//!   handler made was sent;
//! - the engine's counters agree with what SQS applied and answered;
//! - while a handler runs with the heartbeat on, an extension of its message that failed is
//!   tried again before the message's known deadline, where the deadline leaves room for it;
//! - in a liveness run, once the faults stop, every message ends deleted or dead-lettered in
//!   the time allowed, and every message a consumer received was handled, unless it came
//!   behind an earlier message of its FIFO group, or was received again later, or came while
//!   its consumer was shutting down or had every worker busy until then, or its consumer runs
//!   without the heartbeat): no stalled
//!   engine, and no message dead-lettered unseen;
//! - on a standard queue that delivers a message twice (a second receipt handle while the first
//!   holds it), either handle's handler may run, and the message may be handled after the other
//!   handle deleted it; but each handle is settled only as its own handler said (never deleted
//!   for a handler that retried, never returned for one that acked, never deleted before its
//!   handler ended);
//! - when the queue is deleted, every consumer's `run` returns an error naming the queue by
//!   its `give_up_after` (see [`Workload::give_up_by`](crate::workload::Workload::give_up_by)),
//!   its health says unhealthy, no handler running then is cut before its work is done, and a
//!   settlement that fails says which queue;
//! - nothing panics but the handlers that panic on purpose.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use sqs_engine::MAX_VISIBILITY;
use sqs_engine::testing::Change;

use crate::record::{Action, Answer, Event};
use crate::run::Run;
use crate::workload::{Api, End, OutageKind};

/// The violations of `run`, empty when it kept every invariant.
pub fn check(run: &Run) -> Vec<String> {
    let facts = Facts::of(run);
    let mut violations = Vec::new();
    none_lost(run, &facts, &mut violations);
    not_handled_after_delete(run, &facts, &mut violations);
    retry_after_kept(run, &facts, &mut violations);
    fifo_order(run, &facts, &mut violations);
    held_within_capacity(run, &facts, &mut violations);
    unsettled_let_go(run, &facts, &mut violations);
    shutdown_in_time_and_complete(run, &facts, &mut violations);
    metrics_agree(run, &facts, &mut violations);
    live(run, &facts, &mut violations);
    heartbeat_persists(run, &facts, &mut violations);
    each_handle_settled_as_its_handler_said(run, &facts, &mut violations);
    queue_deletion_handled(run, &facts, &mut violations);
    if run.panics > 0 {
        violations.push(format!(
            "{} panic(s) besides the handlers' deliberate ones",
            run.panics
        ));
    }
    violations
}

/// One batch call, as made and answered.
struct Call {
    consumer: usize,
    action: Action,
    /// Its event's index.
    index: usize,
    at: Duration,
    /// Each entry's receipt handle and visibility seconds (zero for a delete).
    entries: Vec<(String, u32)>,
    /// Whether the engine got SQS's answer (rather than an error).
    delivered: bool,
    /// The receipt handles SQS applied a change for during the call.
    applied: HashSet<String>,
}

/// What the checks look up, indexed once.
struct Facts {
    calls: HashMap<u64, Call>,
    /// The receipt handle of (consumer, message id, receive count), as delivered.
    receipt_of: HashMap<(usize, String, u32), String>,
    /// When the receive that delivered a receipt handle was first tried (a FIFO receive
    /// retried with its attempt id counts from its first call).
    receive_call_at: HashMap<String, Duration>,
    /// Journal position of each message's removing delete.
    removed_at: HashMap<String, usize>,
    /// The consumer whose receipt handle removed each message.
    removed_by: HashMap<String, usize>,
    /// Journal position of each message's move to the dead-letter queue.
    dead_at: HashMap<String, usize>,
    /// The messages sent to the queue, in order, with their group.
    sent: Vec<(String, Option<String>)>,
    /// Journal position of each duplicate receive (a message handed out again while in
    /// flight), by message id.
    duplicated: HashMap<String, Vec<usize>>,
    /// Journal position of each message's loss with its deleted queue.
    gone_with_queue: HashMap<String, usize>,
}

impl Facts {
    fn of(run: &Run) -> Self {
        let queue = &run.workload.queue;
        let mut removed_at = HashMap::new();
        let mut dead_at = HashMap::new();
        let mut sent = Vec::new();
        let mut duplicated: HashMap<String, Vec<usize>> = HashMap::new();
        let mut gone_with_queue = HashMap::new();
        for (position, applied) in run.journal.iter().enumerate() {
            if applied.queue != *queue {
                continue;
            }
            match &applied.change {
                Change::Received {
                    duplicate: true, ..
                } => {
                    duplicated
                        .entry(applied.message_id.clone())
                        .or_default()
                        .push(position);
                }
                Change::QueueDeleted => {
                    gone_with_queue.insert(applied.message_id.clone(), position);
                }
                Change::Deleted { removed: true, .. } => {
                    removed_at.insert(applied.message_id.clone(), position);
                }
                Change::DeadLettered { .. } => {
                    dead_at.insert(applied.message_id.clone(), position);
                }
                Change::Sent { group_id } => {
                    sent.push((applied.message_id.clone(), group_id.clone()));
                }
                _ => {}
            }
        }
        let mut calls = HashMap::new();
        let mut receipt_of = HashMap::new();
        let mut receive_call_at = HashMap::new();
        let mut first_attempt: HashMap<&String, Duration> = HashMap::new();
        for (index, stamped) in run.events.iter().enumerate() {
            match &stamped.event {
                Event::Call(made) => {
                    let at = match &made.attempt {
                        Some(attempt) => *first_attempt.entry(attempt).or_insert(stamped.at),
                        None => stamped.at,
                    };
                    calls.insert(
                        made.call,
                        Call {
                            consumer: made.consumer,
                            action: made.action,
                            index,
                            at,
                            entries: made.entries.clone(),
                            delivered: false,
                            applied: HashSet::new(),
                        },
                    );
                }
                Event::Answered {
                    consumer,
                    call,
                    applied,
                    answer,
                    ..
                } => {
                    let Some(made) = calls.get_mut(call) else {
                        continue;
                    };
                    made.delivered = !matches!(answer, Answer::Failed(_));
                    for change in run.journal.get(applied.0..applied.1).unwrap_or_default() {
                        if let Some(receipt) = receipt_in(&change.change) {
                            made.applied.insert(receipt.to_owned());
                        }
                    }
                    if let Answer::Received(messages) = answer {
                        for (message_id, receive_count, receipt) in messages {
                            receipt_of.insert(
                                (*consumer, message_id.clone(), *receive_count),
                                receipt.clone(),
                            );
                            receive_call_at.insert(receipt.clone(), made.at);
                        }
                    }
                }
                _ => {}
            }
        }
        let owner: HashMap<&String, usize> = receipt_of
            .iter()
            .map(|((consumer, _, _), receipt)| (receipt, *consumer))
            .collect();
        let removed_by = run
            .journal
            .iter()
            .filter_map(|applied| match &applied.change {
                Change::Deleted {
                    receipt_handle,
                    removed: true,
                } => Some((applied.message_id.clone(), *owner.get(receipt_handle)?)),
                _ => None,
            })
            .collect();
        Self {
            calls,
            receipt_of,
            removed_by,
            receive_call_at,
            removed_at,
            dead_at,
            sent,
            duplicated,
            gone_with_queue,
        }
    }

    /// Whether SQS handed `message_id` out again while in flight before journal position
    /// `before`.
    fn duplicated_before(&self, message_id: &str, before: usize) -> bool {
        self.duplicated
            .get(message_id)
            .is_some_and(|positions| positions.iter().any(|at| *at < before))
    }

    fn receipt(&self, consumer: usize, message_id: &str, receive_count: u32) -> Option<&String> {
        self.receipt_of
            .get(&(consumer, message_id.to_owned(), receive_count))
    }

    /// Whether `consumer` made a call after event `index` with an entry for `receipt` that
    /// settles `end`.
    fn sent_after(&self, consumer: usize, receipt: &str, index: usize, end: End) -> bool {
        self.calls.values().any(|call| {
            call.consumer == consumer
                && call.index > index
                && call
                    .entries
                    .iter()
                    .any(|(r, seconds)| r == receipt && settles(end, call.action, *seconds))
        })
    }

    /// Whether such a call was answered, with SQS having applied the entry.
    fn applied_after(&self, consumer: usize, receipt: &str, index: usize, end: End) -> bool {
        self.calls.values().any(|call| {
            call.consumer == consumer
                && call.index > index
                && call.delivered
                && call.applied.contains(receipt)
                && call
                    .entries
                    .iter()
                    .any(|(r, seconds)| r == receipt && settles(end, call.action, *seconds))
        })
    }
}

fn receipt_in(change: &Change) -> Option<&str> {
    match change {
        Change::Received { receipt_handle, .. }
        | Change::Deleted { receipt_handle, .. }
        | Change::VisibilityChanged { receipt_handle, .. } => Some(receipt_handle),
        _ => None,
    }
}

/// Whether an entry of `action` with `seconds` can be the settlement of a handler's `end`
/// (rather than, say, an extension of the heartbeat still under way when the handler ended).
fn settles(end: End, action: Action, seconds: u32) -> bool {
    match end {
        End::Ack => action == Action::Delete,
        // At the redrive cap a drop returns the message (visibility 0) for SQS to move.
        End::Drop => {
            action == Action::Delete || (action == Action::ChangeVisibility && seconds == 0)
        }
        End::Retry => action == Action::ChangeVisibility && seconds == 0,
        // The seconds depend on when it is sent and on the 12-hour window; for a failure, on
        // the engine's error backoff (the broker's nack returns it at once).
        End::RetryAfter(_) | End::Fail => action == Action::ChangeVisibility,
        End::Panic => false,
    }
}

fn none_lost(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    let remaining: HashSet<&String> = run.remaining.iter().collect();
    let dead: HashSet<&String> = run.dead_lettered.iter().collect();
    for (message_id, _) in &facts.sent {
        let ends = [
            facts.removed_at.contains_key(message_id),
            facts.dead_at.contains_key(message_id) && dead.contains(message_id),
            remaining.contains(message_id),
            facts.gone_with_queue.contains_key(message_id),
        ];
        let count = ends.iter().filter(|end| **end).count();
        if count != 1 {
            violations.push(format!(
                "{message_id} ends {count} ways (deleted, dead-lettered, on the queue, gone with the queue): {ends:?}"
            ));
        }
    }
    // Every removal was asked for by a handler that acked or dropped that very receive.
    let mut asked: HashSet<&String> = HashSet::new();
    for stamped in &run.events {
        if let Event::Ended {
            consumer,
            message_id,
            receive_count,
            end: End::Ack | End::Drop,
        } = &stamped.event
            && let Some(receipt) = facts.receipt(*consumer, message_id, *receive_count)
        {
            asked.insert(receipt);
        }
    }
    for applied in &run.journal {
        if let Change::Deleted {
            receipt_handle,
            removed: true,
        } = &applied.change
            && !asked.contains(receipt_handle)
        {
            violations.push(format!(
                "{} was deleted by {receipt_handle}, which no handler acked or dropped",
                applied.message_id
            ));
        }
    }
}

fn not_handled_after_delete(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    for stamped in &run.events {
        if let Event::Started {
            consumer,
            message_id,
            receive_count,
        } = &stamped.event
            && let Some(removed) = facts.removed_at.get(message_id)
            && *removed < stamped.journal
            && facts.removed_by.get(message_id) == Some(consumer)
            // Delivered twice: the other copy was deleted while this one was held.
            && !facts.duplicated.contains_key(message_id)
        {
            violations.push(format!(
                "c{consumer} started {message_id} #{receive_count} at {:?}, after SQS applied its own delete (sqs#{removed})",
                stamped.at
            ));
        }
    }
}

fn retry_after_kept(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    for stamped in &run.events {
        let Event::Ended {
            consumer,
            message_id,
            receive_count,
            end: End::RetryAfter(delay),
        } = &stamped.event
        else {
            continue;
        };
        let Some(receipt) = facts.receipt(*consumer, message_id, *receive_count) else {
            continue;
        };
        let Some(called_at) = facts.receive_call_at.get(receipt) else {
            continue;
        };
        let next = run
            .journal
            .iter()
            .enumerate()
            .skip(stamped.journal)
            .find(|(_, applied)| {
                applied.message_id == *message_id
                    && matches!(
                        applied.change,
                        Change::Received {
                            duplicate: false,
                            ..
                        }
                    )
            });
        let Some((next_position, next)) = next else {
            continue;
        };
        if facts.duplicated_before(message_id, next_position) {
            // Delivered twice: the other copy's settlement may have returned it sooner.
            continue;
        }
        // The settlement's change, told from an extension of the heartbeat decided before the
        // handler ended and applied after it (unless the two have the same length).
        let extension = extension_seconds(run.workload.consumers[*consumer].visibility);
        let wanted = delay
            .as_secs()
            .saturating_add(u64::from(delay.subsec_nanos() > 0));
        let changed = run
            .journal
            .get(stamped.journal..next_position)
            .unwrap_or_default()
            .iter()
            .any(|applied| {
                matches!(&applied.change, Change::VisibilityChanged { receipt_handle, seconds }
                    if receipt_handle == receipt
                        && (*seconds != extension || u64::from(*seconds) == wanted))
            });
        if !changed {
            // The settlement did not reach SQS: the message came back when its visibility
            // lapsed, as it may.
            continue;
        }
        let overridden = run.events.iter().any(|late| {
            matches!(late.event, Event::AppliedLate { applied, .. }
            if applied.0 >= stamped.journal && applied.0 < next_position
                && run.journal[applied.0..applied.1].iter().any(|applied| {
                    matches!(&applied.change, Change::VisibilityChanged { receipt_handle, .. }
                        if receipt_handle == receipt)
                }))
        });
        if overridden {
            // A call the engine had given up on reached SQS after the settlement and set
            // another visibility: nothing a client can prevent.
            continue;
        }
        let clamp = *called_at + MAX_VISIBILITY - Duration::from_secs(1);
        let earliest = stamped
            .at
            .checked_add(*delay)
            .map_or(clamp, |at| at.min(clamp));
        let received_at = next.at.saturating_duration_since(run.start);
        if received_at < earliest {
            violations.push(format!(
                "{message_id}: retry_after({delay:?}) at {:?} by c{consumer}, received again at {received_at:?}, before {earliest:?}",
                stamped.at
            ));
        }
    }
}

/// How long the heartbeat extends a message received with `visibility` seconds (the engine's
/// documented rule: the visibility timeout, or five margins where that is longer, a margin
/// being a fifth of the timeout within 1 to 60 s and at most half of it), in whole seconds.
fn extension_seconds(visibility: u32) -> u32 {
    let timeout = Duration::from_secs(u64::from(visibility));
    let margin = (timeout / 5)
        .clamp(Duration::from_secs(1), Duration::from_secs(60))
        .min(timeout / 2);
    let extension = timeout.max(margin * 5);
    u32::try_from(extension.as_secs() + u64::from(extension.subsec_nanos() > 0)).unwrap_or(u32::MAX)
}

fn fifo_order(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    if !run.workload.fifo {
        return;
    }
    let position: HashMap<&String, usize> = facts
        .sent
        .iter()
        .enumerate()
        .map(|(position, (message_id, _))| (message_id, position))
        .collect();
    // A batch handler gets a receive's messages together and owns their order: the messages
    // of one batch (their start events follow each other, at one moment) start together.
    let mut batch_of: Vec<Vec<&String>> = Vec::new();
    let mut batch: Vec<&String> = Vec::new();
    let mut previous: Option<(usize, Duration)> = None;
    for stamped in &run.events {
        if let Event::Started {
            consumer,
            message_id,
            ..
        } = &stamped.event
            && run.workload.consumers[*consumer].api == Api::Batches
            && !run.workload.consumers[*consumer].broker
        {
            if previous != Some((*consumer, stamped.at)) {
                batch.clear();
            }
            previous = Some((*consumer, stamped.at));
            batch_of.push(batch.clone());
            batch.push(message_id);
        } else {
            previous = None;
            batch.clear();
            batch_of.push(Vec::new());
        }
    }
    for (index, stamped) in run.events.iter().enumerate() {
        let Some((consumer, message_id, receive_count)) = stamped.event.started() else {
            continue;
        };
        let Some(&mine) = position.get(message_id) else {
            continue;
        };
        let started_with = &batch_of[index];
        let group = &facts.sent[mine].1;
        for (earlier, earlier_group) in &facts.sent[..mine] {
            if earlier_group != group {
                continue;
            }
            let gone = |at: Option<&usize>| at.is_some_and(|at| *at < stamped.journal);
            if !gone(facts.removed_at.get(earlier))
                && !gone(facts.dead_at.get(earlier))
                && !started_with.contains(&earlier)
            {
                violations.push(format!(
                    "c{consumer} started {message_id} #{receive_count} of {group:?} at {:?} while {earlier}, sent before it, was still on the queue",
                    stamped.at
                ));
            }
        }
    }
}

fn held_within_capacity(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    let consumers = run.workload.consumers.len();
    // Per consumer: receipts delivered whose handler has not ended, that the consumer has made
    // no call for (an extension, a return, a settlement: any of them may be about to free it)
    // and that SQS has not had a visibility change for: held for sure.
    let mut open: Vec<HashSet<String>> = vec![HashSet::new(); consumers];
    let mut changed: HashSet<String> = HashSet::new();
    let mut journal = 0;
    for stamped in &run.events {
        for applied in run
            .journal
            .get(journal..stamped.journal)
            .unwrap_or_default()
        {
            if let Change::VisibilityChanged { receipt_handle, .. } = &applied.change {
                changed.insert(receipt_handle.clone());
            }
        }
        journal = journal.max(stamped.journal);
        match &stamped.event {
            Event::Ended {
                consumer,
                message_id,
                receive_count,
                ..
            }
            | Event::LetGo {
                consumer,
                message_id,
                receive_count,
            } => {
                if let Some(receipt) = facts.receipt(*consumer, message_id, *receive_count) {
                    open[*consumer].remove(receipt);
                }
            }
            Event::Call(made) => {
                for (receipt, _) in &made.entries {
                    open[made.consumer].remove(receipt);
                }
            }
            Event::Answered {
                consumer,
                answer: Answer::Received(messages),
                in_flight: Some((in_flight, engine_holds)),
                ..
            } => {
                open[*consumer].extend(messages.iter().map(|(_, _, receipt)| receipt.clone()));
                let capacity = run.workload.consumers[*consumer].capacity();
                let held = in_flight
                    .iter()
                    .filter(|receipt| {
                        open[*consumer].contains(*receipt) && !changed.contains(*receipt)
                    })
                    .count();
                if held > capacity {
                    violations.push(format!(
                        "c{consumer} holds at least {held} messages at {:?}, more than its max_held = {capacity}",
                        stamped.at
                    ));
                }
                if *engine_holds > capacity as u64 {
                    violations.push(format!(
                        "c{consumer} counts {engine_holds} messages held at {:?}, more than its max_held = {capacity}",
                        stamped.at
                    ));
                }
            }
            _ => {}
        }
    }
}

/// The longest a consumer's batch call takes, retries and backoffs included.
fn call_chain(run: &Run, consumer: usize) -> Duration {
    let workload = &run.workload;
    workload.consumers[consumer].call_chain(workload)
}

fn unsettled_let_go(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    for stamped in &run.events {
        let Event::Ended {
            consumer,
            message_id,
            receive_count,
            end: End::Panic,
        } = &stamped.event
        else {
            continue;
        };
        let Some(receipt) = facts.receipt(*consumer, message_id, *receive_count) else {
            continue;
        };
        // An extension in flight when the handler panicked may still land, retries included.
        let until = stamped.at + call_chain(run, *consumer) + Duration::from_secs(1);
        for applied in run.journal.iter().skip(stamped.journal) {
            if let Change::VisibilityChanged {
                receipt_handle,
                seconds,
            } = &applied.change
                && receipt_handle == receipt
                && applied.at.saturating_duration_since(run.start) > until
            {
                violations.push(format!(
                    "c{consumer} kept {message_id} #{receive_count} hidden ({seconds} s at {:?}) after its handler panicked at {:?}",
                    applied.at.saturating_duration_since(run.start),
                    stamped.at
                ));
                break;
            }
        }
    }
}

fn shutdown_in_time_and_complete(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    let workload = &run.workload;
    for (consumer, stopped) in run.stopped.iter().enumerate() {
        let plan = &workload.consumers[consumer];
        // One settlement's calls, retries and backoffs included; two such in a row at most (an
        // extension in flight, then the settlement of the same message).
        let chain = call_chain(run, consumer);
        let budget = plan.shutdown_timeout
            + Duration::from_secs(1)
            + chain * 2
            + plan.max_batch_wait * 2
            + Duration::from_secs(1);
        let signalled = run
            .events
            .iter()
            .find_map(|stamped| match stamped.event {
                Event::ShutdownSignalled { consumer: c } if c == consumer => Some(stamped.at),
                _ => None,
            })
            .unwrap_or(plan.shutdown_at);
        let took = stopped.at.saturating_sub(signalled);
        if took > budget {
            violations.push(format!(
                "c{consumer} took {took:?} to shut down, more than its budget of {budget:?}"
            ));
        }
        if let Some(Err(error)) = &stopped.stats
            && !failed_as_it_may(run, consumer, error)
        {
            violations.push(format!("c{consumer} failed: {error}"));
        }
    }
    for (index, stamped) in run.events.iter().enumerate() {
        let Event::Ended {
            consumer,
            message_id,
            receive_count,
            end,
        } = &stamped.event
        else {
            continue;
        };
        if *end == End::Panic {
            continue;
        }
        let Some(receipt) = facts.receipt(*consumer, message_id, *receive_count) else {
            violations.push(format!(
                "c{consumer} handled {message_id} #{receive_count}, which no receive delivered to it"
            ));
            continue;
        };
        if !facts.sent_after(*consumer, receipt, index, *end) {
            violations.push(format!(
                "c{consumer}'s {end:?} of {message_id} #{receive_count} at {:?} was never sent",
                stamped.at
            ));
        }
    }
}

/// How long before its deadline the heartbeat extends a message received with `visibility`
/// seconds (the engine's documented rule: a fifth of the timeout, within 1 to 60 s, at most
/// half of it).
fn margin(visibility: u32) -> Duration {
    let timeout = Duration::from_secs(u64::from(visibility));
    (timeout / 5)
        .clamp(Duration::from_secs(1), Duration::from_secs(60))
        .min(timeout / 2)
}

/// The visibility deadline the engine can know for `receipt` when its call at event `index`
/// is made: from the start of the receive call that brought it (SQS hides the message at some
/// moment of a long poll, and the engine cannot know which), or from the start of its last
/// extension call that SQS applied and answered before then; since the run began.
fn known_deadline(
    facts: &Facts,
    calls: &[&Call],
    receipt: &str,
    visibility: u32,
    index: usize,
) -> Option<Duration> {
    let received =
        *facts.receive_call_at.get(receipt)? + Duration::from_secs(u64::from(visibility));
    let extended = calls
        .iter()
        .filter(|call| call.index < index && call.delivered && call.applied.contains(receipt))
        .filter_map(|call| {
            let seconds = call.entries.iter().find(|(r, _)| r == receipt)?.1;
            Some(call.at + Duration::from_secs(u64::from(seconds)))
        })
        .max();
    Some(extended.map_or(received, |extended| extended.max(received)))
}

fn heartbeat_persists(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    // Per receipt, its consumer's visibility calls, in the order they were made.
    let mut calls_of: HashMap<&str, Vec<&Call>> = HashMap::new();
    let mut calls: Vec<&Call> = facts
        .calls
        .values()
        .filter(|call| call.action == Action::ChangeVisibility)
        .collect();
    calls.sort_by_key(|call| call.index);
    for call in calls {
        for (receipt, _) in &call.entries {
            calls_of.entry(receipt.as_str()).or_default().push(call);
        }
    }
    let mut ended: HashMap<(usize, &String, u32), Duration> = HashMap::new();
    for stamped in &run.events {
        if let Event::Ended {
            consumer,
            message_id,
            receive_count,
            ..
        } = &stamped.event
        {
            ended.insert((*consumer, message_id, *receive_count), stamped.at);
        }
    }
    for stamped in &run.events {
        let Some((consumer, message_id, receive_count)) = stamped.event.started() else {
            continue;
        };
        let plan = &run.workload.consumers[*consumer];
        if !plan.heartbeat {
            continue;
        }
        let Some(receipt) = facts.receipt(*consumer, message_id, *receive_count) else {
            continue;
        };
        let Some(&end) = ended.get(&(*consumer, message_id, *receive_count)) else {
            continue;
        };
        let extension = extension_seconds(plan.visibility);
        let allowance = call_chain(run, *consumer) * 2
            + margin(plan.visibility) / 4
            + plan.max_batch_wait
            + Duration::from_secs(2);
        let attempts: Vec<&&Call> = calls_of
            .get(receipt.as_str())
            .map(|calls| {
                calls
                    .iter()
                    .filter(|call| {
                        call.consumer == *consumer
                            && call.at >= stamped.at
                            && call.at < end
                            && call
                                .entries
                                .iter()
                                .any(|(r, seconds)| r == receipt && *seconds == extension)
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (k, attempt) in attempts.iter().enumerate() {
            if attempt.delivered && attempt.applied.contains(receipt) {
                continue;
            }
            // Once the queue is gone, or once another copy of the message is out (whose
            // settlement may end this handle's hold), an extension may fail for good.
            if run
                .workload
                .queue_deleted_at
                .is_some_and(|deleted_at| attempt.at >= deleted_at)
                || facts.duplicated_before(message_id, run.events[attempt.index].journal)
            {
                continue;
            }
            let all = calls_of
                .get(receipt.as_str())
                .map_or(&[][..], Vec::as_slice);
            let Some(deadline) =
                known_deadline(facts, all, receipt, plan.visibility, attempt.index)
            else {
                continue;
            };
            let limit = end.min(deadline);
            if limit <= attempt.at + allowance {
                continue;
            }
            if attempts.get(k + 1).is_none_or(|next| next.at > limit) {
                violations.push(format!(
                    "c{consumer}'s extension of {message_id} #{receive_count} failed at {:?} and was not tried again by {limit:?}, though its handler ran until {end:?} and the message's deadline was {deadline:?}",
                    attempt.at
                ));
            }
        }
    }
}

fn live(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    let Some(liveness) = run.workload.liveness else {
        return;
    };
    for message_id in &run.remaining {
        violations.push(format!(
            "{message_id} is still on the queue at {:?}, long after the faults stopped at {:?}",
            liveness.settle_by, liveness.faults_until
        ));
    }
    let group_of: HashMap<&String, (usize, &Option<String>)> = facts
        .sent
        .iter()
        .enumerate()
        .map(|(position, (message_id, group))| (message_id, (position, group)))
        .collect();
    let mut started: HashSet<(usize, &String, u32)> = HashSet::new();
    let mut received_again: HashMap<&String, usize> = HashMap::new();
    let mut shutting_down: HashMap<usize, usize> = HashMap::new();
    for (index, stamped) in run.events.iter().enumerate() {
        if let Some((consumer, message_id, receive_count)) = stamped.event.started() {
            started.insert((*consumer, message_id, *receive_count));
            continue;
        }
        match &stamped.event {
            Event::Answered {
                answer: Answer::Received(messages),
                ..
            } => {
                for (message_id, _, _) in messages {
                    received_again.insert(message_id, index);
                }
            }
            Event::ShutdownSignalled { consumer } => {
                shutting_down.entry(*consumer).or_insert(index);
            }
            _ => {}
        }
    }
    let last_free = last_free_worker(run, &shutting_down);
    // Per consumer, the receipts it holds, with the message's place and group: from its
    // receive until SQS answered a settlement or return of it (an extension keeps it held; on
    // a FIFO queue the group's turn lasts until that answer).
    let mut held: Vec<HashMap<&String, (usize, &Option<String>)>> =
        vec![HashMap::new(); run.workload.consumers.len()];
    let mut settling: HashMap<u64, Vec<&String>> = HashMap::new();
    for (index, stamped) in run.events.iter().enumerate() {
        match &stamped.event {
            Event::Call(made) => {
                let extension = extension_seconds(run.workload.consumers[made.consumer].visibility);
                let settled = made
                    .entries
                    .iter()
                    .filter(|(_, seconds)| made.action == Action::Delete || *seconds != extension)
                    .map(|(receipt, _)| receipt)
                    .collect();
                settling.insert(made.call, settled);
                continue;
            }
            Event::Answered {
                consumer,
                call,
                answer: Answer::Entries(_),
                ..
            } => {
                for receipt in settling.remove(call).unwrap_or_default() {
                    held[*consumer].remove(receipt);
                }
                continue;
            }
            _ => {}
        }
        let Event::Answered {
            consumer,
            answer: Answer::Received(messages),
            ..
        } = &stamped.event
        else {
            continue;
        };
        let before = held[*consumer].clone();
        for (message_id, _, receipt) in messages {
            if let Some(&(position, group)) = group_of.get(message_id) {
                held[*consumer].insert(receipt, (position, group));
            }
        }
        // Without the heartbeat, a message held past its visibility timeout (waiting for a
        // worker, or behind a long handler) is SQS's to hand out again: nothing is promised.
        if !run.workload.consumers[*consumer].heartbeat
            || shutting_down
                .get(consumer)
                .is_some_and(|signalled| *signalled < index)
        {
            continue;
        }
        for (message_id, receive_count, receipt) in messages {
            // The heartbeat kept trying, and SQS refused: the message was handed out again
            // when its visibility lapsed, as it may.
            let extension_failed = facts.calls.values().any(|call| {
                call.consumer == *consumer
                    && call.action == Action::ChangeVisibility
                    && !(call.delivered && call.applied.contains(receipt))
                    && call.entries.iter().any(|(r, _)| r == receipt)
            });
            // Every worker of the consumer stayed busy from this receive until its shutdown
            // (a handler that outlives the run): the message waited its turn, extended.
            let workers_busy = last_free[*consumer].is_none_or(|free| free < stamped.at);
            if extension_failed
                || workers_busy
                || started.contains(&(*consumer, message_id, *receive_count))
                || received_again
                    .get(message_id)
                    .is_some_and(|last| *last > index)
            {
                continue;
            }
            let Some(&(position, group)) = group_of.get(message_id) else {
                continue;
            };
            // Behind an earlier message of its group (or an older copy of itself) that came in
            // the same receive or that the consumer still held: its order made it wait, and
            // what it waited behind decided its fate.
            let earlier = |(earlier, its): &(usize, &Option<String>)| {
                group.is_some() && *its == group && *earlier <= position
            };
            let behind = messages.iter().any(|(other, _, _)| {
                other != message_id
                    && group_of
                        .get(other)
                        .is_some_and(|(earlier, its)| *earlier < position && *its == group)
            }) || before.values().any(earlier);
            if behind {
                continue;
            }
            let fate = if facts.dead_at.contains_key(message_id) {
                "; it was dead-lettered"
            } else {
                ""
            };
            violations.push(format!(
                "c{consumer} received {message_id} #{receive_count} at {:?} and never handled it{fate}",
                stamped.at
            ));
        }
    }
}

/// Per consumer, the last moment before its shutdown signal at which one of its workers was
/// free: a handler call (a batch handler's call for the batch API) holds a worker from its
/// first start to its first end, and the state after every event of a moment counts.
fn last_free_worker(run: &Run, shutting_down: &HashMap<usize, usize>) -> Vec<Option<Duration>> {
    let consumers = &run.workload.consumers;
    let mut running = vec![0_usize; consumers.len()];
    let mut last_free = vec![None; consumers.len()];
    let mut previous: Option<&Event> = None;
    for (index, stamped) in run.events.iter().enumerate() {
        let batches = |consumer: usize| {
            consumers[consumer].api == Api::Batches && !consumers[consumer].broker
        };
        match &stamped.event {
            Event::Started { consumer, .. } => {
                let same_call = batches(*consumer)
                    && matches!(previous, Some(Event::Started { consumer: c, .. }) if c == consumer);
                if !same_call {
                    running[*consumer] += 1;
                }
            }
            Event::Ended { consumer, .. } => {
                let same_call = batches(*consumer)
                    && matches!(previous, Some(Event::Ended { consumer: c, .. }) if c == consumer);
                if !same_call {
                    running[*consumer] = running[*consumer].saturating_sub(1);
                }
            }
            _ => {}
        }
        previous = Some(&stamped.event);
        let moment_ends = run
            .events
            .get(index + 1)
            .is_none_or(|next| next.at != stamped.at);
        if moment_ends {
            for (consumer, plan) in consumers.iter().enumerate() {
                let live = shutting_down
                    .get(&consumer)
                    .is_none_or(|signalled| *signalled > index);
                if live && running[consumer] < plan.workers {
                    last_free[consumer] = Some(stamped.at);
                }
            }
        }
    }
    last_free
}

/// Whether consumer `consumer` may have stopped with `error`: it gave up on an outage of
/// refusals that lasted its `give_up_after`, or every call that opens the queue failed until
/// its retry budget was spent.
fn failed_as_it_may(run: &Run, consumer: usize, error: &str) -> bool {
    let plan = &run.workload.consumers[consumer];
    let gave_up = run.workload.outage.is_some_and(|outage| {
        outage.kind == OutageKind::Denied && outage.until - outage.from >= plan.give_up_after
    }) && error.contains("gave up");
    let open_failed = error.starts_with("opening queue")
        && run
            .events
            .iter()
            .rev()
            .find_map(|stamped| match &stamped.event {
                Event::Answered {
                    consumer: c,
                    answer,
                    ..
                } if *c == consumer => Some(matches!(answer, Answer::Failed(_))),
                _ => None,
            })
            .unwrap_or(false);
    // A deleted queue's errors are checked by `queue_deletion_handled`.
    gave_up || open_failed || run.workload.queue_deleted_at.is_some()
}

fn metrics_agree(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    for (consumer, stopped) in run.stopped.iter().enumerate() {
        let Some(Ok(stats)) = &stopped.stats else {
            continue;
        };
        let mut received = 0;
        // Acks and drops come from handlers only (the engine's own returns are retries and
        // retry_afters), so their counts can be told from SQS's record.
        let mut expected = [0u64; 2];
        let mut calls = [0u64; 2];
        for (index, stamped) in run.events.iter().enumerate() {
            match &stamped.event {
                Event::Answered {
                    consumer: c,
                    answer: Answer::Received(messages),
                    ..
                } if *c == consumer => received += messages.len() as u64,
                Event::Call(made) if made.consumer == consumer => match made.action {
                    Action::Delete => calls[0] += 1,
                    Action::ChangeVisibility => calls[1] += 1,
                    Action::Receive | Action::Open => {}
                },
                Event::Ended {
                    consumer: c,
                    message_id,
                    receive_count,
                    end,
                } if *c == consumer => {
                    let slot = match end {
                        End::Ack => 0,
                        End::Drop => 1,
                        _ => continue,
                    };
                    if let Some(receipt) = facts.receipt(consumer, message_id, *receive_count)
                        && facts.applied_after(consumer, receipt, index, *end)
                    {
                        expected[slot] += 1;
                    }
                }
                _ => {}
            }
        }
        let counted = [
            ("messages received", stats.messages_received, received),
            ("acks answered ok", stats.acked.ok, expected[0]),
            ("drops answered ok", stats.dropped.ok, expected[1]),
            (
                "DeleteMessageBatch calls",
                stats.delete_message_batch.total(),
                calls[0],
            ),
            (
                "ChangeMessageVisibilityBatch calls",
                stats.change_message_visibility_batch.total(),
                calls[1],
            ),
            ("messages held after shutdown", stats.in_flight, 0),
        ];
        for (what, engine, seen) in counted {
            if engine != seen {
                violations.push(format!(
                    "c{consumer} counts {engine} {what}; SQS's record says {seen}"
                ));
            }
        }
    }
}

/// Each receipt handle whose handler ran is settled only as that handler said: what a
/// duplicate delivery puts to the test, with two handles of one message held at once.
fn each_handle_settled_as_its_handler_said(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    // Each handle's handler: who held it, and the events where it started and ended.
    let mut started: HashMap<&String, usize> = HashMap::new();
    let mut ended: HashMap<&String, (usize, End)> = HashMap::new();
    for (index, stamped) in run.events.iter().enumerate() {
        if let Some((consumer, message_id, receive_count)) = stamped.event.started() {
            if let Some(receipt) = facts.receipt(*consumer, message_id, *receive_count) {
                started.entry(receipt).or_insert(index);
            }
        } else if let Event::Ended {
            consumer,
            message_id,
            receive_count,
            end,
        } = &stamped.event
            && let Some(receipt) = facts.receipt(*consumer, message_id, *receive_count)
        {
            ended.insert(receipt, (index, *end));
        }
    }
    let mut calls: Vec<&Call> = facts.calls.values().collect();
    calls.sort_by_key(|call| call.index);
    for call in calls {
        if call.action == Action::Receive || call.action == Action::Open {
            continue;
        }
        for (receipt, seconds) in &call.entries {
            let Some(&start) = started.get(receipt) else {
                continue;
            };
            if call.index < start {
                continue;
            }
            let wrong = match ended.get(receipt) {
                // Deleted while its handler still ran: some other settlement's.
                None => call.action == Action::Delete,
                Some(&(end_at, _)) if call.index < end_at => call.action == Action::Delete,
                Some(&(_, end)) => match end {
                    End::Retry | End::RetryAfter(_) | End::Fail => call.action == Action::Delete,
                    // Returned (visibility 0) after an ack.
                    End::Ack => call.action == Action::ChangeVisibility && *seconds == 0,
                    End::Drop | End::Panic => false,
                },
            };
            if wrong {
                let what = match call.action {
                    Action::Delete => "deleted".to_owned(),
                    _ => format!("made visible in {seconds} s"),
                };
                let handler = ended.get(receipt).map_or_else(
                    || "still running".to_owned(),
                    |(_, end)| format!("ended {end:?}"),
                );
                violations.push(format!(
                    "c{} {what} {receipt} at {:?}, whose handler {handler}",
                    call.consumer, call.at
                ));
            }
        }
    }
}

/// In a run that deletes the queue: each consumer's `run` returns an error that names the
/// queue in time, and its health says unhealthy; no handler running then is cut before its
/// work is done; a settlement that failed says which queue.
fn queue_deletion_handled(run: &Run, facts: &Facts, violations: &mut Vec<String>) {
    let workload = &run.workload;
    let Some(deleted_at) = workload.queue_deleted_at else {
        return;
    };
    let named = format!("`{}`", workload.queue);
    for (consumer, stopped) in run.stopped.iter().enumerate() {
        let plan = &workload.consumers[consumer];
        let budget = plan.shutdown_timeout
            + Duration::from_secs(1)
            + call_chain(run, consumer) * 2
            + plan.max_batch_wait * 2
            + Duration::from_secs(1);
        // While every place is held by a running handler no receive is made: the receives
        // that find the queue gone start once the handlers end.
        let busy_until = run
            .events
            .iter()
            .filter(|stamped| stamped.at <= stopped.at)
            .filter_map(|stamped| match &stamped.event {
                Event::Ended { consumer: c, .. } if *c == consumer => Some(stamped.at),
                _ => None,
            })
            .max()
            .unwrap_or_default();
        // A handler still running when it stopped kept it busy to the end.
        let mut running: HashSet<(&String, u32)> = HashSet::new();
        for stamped in run.events.iter().filter(|stamped| stamped.at <= stopped.at) {
            match &stamped.event {
                Event::Started {
                    consumer: c,
                    message_id,
                    receive_count,
                } if *c == consumer => {
                    running.insert((message_id, *receive_count));
                }
                Event::Ended {
                    consumer: c,
                    message_id,
                    receive_count,
                    ..
                } if *c == consumer => {
                    running.remove(&(message_id, *receive_count));
                }
                _ => {}
            }
        }
        let busy_until = if running.is_empty() {
            busy_until
        } else {
            stopped.at
        };
        let Some(by) = workload.give_up_by(consumer, busy_until, budget) else {
            continue;
        };
        // Told to stop before it could have given up, it may return as a shutdown does.
        let signalled = run.events.iter().any(|stamped| {
            matches!(stamped.event, Event::ShutdownSignalled { consumer: c } if c == consumer)
                && stamped.at < by
        });
        match &stopped.stats {
            Some(Err(error)) if error.contains(&named) => {}
            Some(Err(error)) => violations.push(format!(
                "c{consumer} failed without naming the deleted queue {named}: {error}"
            )),
            Some(Ok(_)) if signalled => {}
            Some(Ok(_)) => violations.push(format!(
                "c{consumer} returned Ok at {:?} though its queue was deleted at {deleted_at:?}",
                stopped.at
            )),
            None => {}
        }
        if stopped.at > by && !signalled {
            violations.push(format!(
                "c{consumer} returned at {:?}, after {by:?}: the queue was deleted at {deleted_at:?} and it gives up after {:?}",
                stopped.at, plan.give_up_after
            ));
        }
        if stopped.healthy == Some(true) && !signalled {
            violations.push(format!(
                "c{consumer}'s health said healthy once it stopped, its queue deleted"
            ));
        }
        if plan.api == Api::Batches {
            // A batch's handlers end together, at the longest one's end.
            continue;
        }
        for stamped in &run.events {
            let Some((c, message_id, receive_count)) = stamped.event.started() else {
                continue;
            };
            if *c != consumer {
                continue;
            }
            let ended = run.events.iter().any(|other| {
                matches!(&other.event, Event::Ended { consumer: c, message_id: m, receive_count: n, .. }
                    if *c == consumer && m == message_id && n == receive_count)
            });
            let Some((name, _)) = run.names.iter().find(|(_, id)| id == message_id) else {
                continue;
            };
            let work = workload
                .behaviour(name, *receive_count, plan.visibility)
                .work;
            if !ended && stamped.at + work <= stopped.at {
                violations.push(format!(
                    "c{consumer}'s handler of {message_id} #{receive_count}, started at {:?} for {work:?}, was cut: its consumer returned at {:?}",
                    stamped.at, stopped.at
                ));
            }
        }
    }
    for stamped in &run.events {
        if let Event::SettleFailed {
            consumer,
            message_id,
            receive_count,
            error,
        } = &stamped.event
            && !error.contains(&named)
        {
            violations.push(format!(
                "c{consumer}'s settlement of {message_id} #{receive_count} failed without naming the queue: {error}"
            ));
        }
    }
    let _ = facts;
}
