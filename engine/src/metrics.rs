//! What the engine counts: through the `metrics` facade for exporters, and in [`Stats`] for the
//! program itself.
//!
//! Every metric is described once, with its unit, in [`describe`]; the handles of a queue are
//! registered once when it opens, so nothing on the per-message path builds a label or
//! allocates. A count that [`Stats`] reports too is named once, as a `Tally`
//! (`metrics/tally.rs`): one call counts it in its exported counter and in the engine's own
//! cell.
//!
//! | metric | kind | labels | what it counts |
//! |---|---|---|---|
//! | `sqs_engine_calls_total` | counter | `queue`, `action`, `result` | SQS and SNS calls by action (`ReceiveMessage`, `DeleteMessageBatch`, ..., and the RustStream broker's `SendMessageBatch`, `PublishBatch`, `CreateTopic`, `Subscribe`, under the queue's or topic's name) and result (`ok`, `error`) |
//! | `sqs_engine_messages_received_total` | counter | `queue` | messages received |
//! | `sqs_engine_settlements_total` | counter | `queue`, `outcome`, `result` | settlements by outcome (`ack`, `drop`, `retry`, `retry_after`) and result (`ok`, `error`) |
//! | `sqs_engine_batch_entries` | histogram | `queue`, `action` | entries per batch call (`PublishBatch` under the topic's name) |
//! | `sqs_engine_flushes_total` | counter | `queue`, `action`, `reason` | batches sent, by why they went (`full`, `idle`, `deadline`, `shutdown`) |
//! | `sqs_engine_settlement_latency_seconds` | histogram | `queue`, `action` | from the handler's outcome to SQS's answer for its entry |
//! | `sqs_engine_entry_retries_total` | counter | `queue`, `action` | batch entries sent again after a transient failure |
//! | `sqs_engine_late_settlements_total` | counter | `queue` | settlements SQS applied after the message's visibility deadline |
//! | `sqs_engine_unsettled_total` | counter | `queue` | deliveries dropped without an outcome (no call: they come back) |
//! | `sqs_engine_lapsed_total` | counter | `queue` | messages not handed out because their visibility lapsed while they waited received (prefetched too far ahead of the workers, with the heartbeat off): SQS hands them out again |
//! | `sqs_engine_returned_for_order_total` | counter | `queue` | FIFO messages returned unhandled (visibility 0) because an earlier message of their group comes back: handling them first would break the group's order |
//! | `sqs_engine_receives_abandoned_total` | counter | `queue` | long polls still open at shutdown, given up without an answer (not in `sqs_engine_calls_total`) |
//! | `sqs_engine_receive_count` | histogram | `queue` | `ApproximateReceiveCount` of each delivery |
//! | `sqs_engine_last_receive_deliveries_total` | counter | `queue` | deliveries at the last receive the redrive policy allows |
//! | `sqs_engine_redrive_returns_total` | counter | `queue` | drops at the cap returned (visibility 0) for SQS to move to the dead-letter queue |
//! | `sqs_engine_heartbeat_extensions_total` | counter | `queue`, `result` | visibility extensions the heartbeat asked for, by result (`ok`, `error`: given up, at the message's deadline or refused for good; the message may come back while its handler runs) |
//! | `sqs_engine_messages_in_flight` | gauge | `queue` | messages held: received and not yet settled (prefetched, being handled, or with a settlement awaiting SQS's answer). SQS's in-flight count is these, the parked ones, and those of consumers gone |
//! | `sqs_engine_messages_parked` | gauge | `queue` | messages returned with a delay (`retry_after`) whose delay has not ended: invisible, so in SQS's `ApproximateNumberOfMessagesNotVisible`, yet held by no consumer; counted from SQS's answer, by the engine that parked them, while it runs (see `metrics/parked.rs`) |
//! | `sqs_engine_messages_prefetched` | gauge | `queue` | messages received and waiting for a worker |
//! | `sqs_engine_messages_held_bytes` | gauge | `queue` | bytes of messages held, bodies and message attributes (whole KiB each, until settled), bounded by `max_held_bytes` |
//! | `sqs_engine_receivers_active` | gauge | `queue` | long-poll receivers running: as many as keep up with the queue, up to `receivers` |
//! | `sqs_engine_settle_batches_in_flight` | gauge | `queue`, `action` | settlement batch calls awaiting SQS's answer |
//! | `sqs_engine_handlers_running` | gauge | `queue` | handler invocations running |
//! | `sqs_engine_workers` | gauge | `queue` | handler invocations allowed at once: utilisation is running / workers |
//! | `sqs_engine_handler_duration_seconds` | histogram | `queue` | time a handler invocation took |
//! | `sqs_engine_oldest_message_age_seconds` | gauge | `queue` | age, from its `SentTimestamp`, of the oldest message of the latest receive |

use std::sync::Arc;
use std::sync::Once;

use metrics::{
    Counter, Gauge, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};

use crate::handle::outcome::Outcome;
use crate::metrics::parked::Parked;
use crate::sqs::batch::FlushReason;
use crate::sqs::lane::Lane;

mod names;
pub(crate) mod parked;
mod stats;
mod tally;

pub(crate) use names::Action;
use names::{
    ABANDONED, BATCH_ENTRIES, BATCHES_IN_FLIGHT, CALLS, ENTRY_RETRIES, EXTENSIONS, FLUSHES,
    HANDLER_DURATION, HANDLERS_RUNNING, HELD_BYTES, IN_FLIGHT, LAPSED, LAST_RECEIVE, LATE,
    OLDEST_AGE, PARKED, PREFETCHED, RECEIVE_COUNT, RECEIVED, RECEIVERS_ACTIVE, REDRIVE,
    RETURNED_FOR_ORDER, SETTLE_LATENCY, SETTLEMENTS, UNSETTLED, WORKERS,
};
pub(crate) use stats::StatsCells;
pub use stats::{Count, Stats};
use tally::{TALLIES, Tally};

/// The calls of one publish destination (a queue's `SendMessageBatch`, a topic's
/// `PublishBatch`), in `sqs_engine_calls_total` and `sqs_engine_batch_entries` under the
/// destination's name as `queue`. Registered once, when the destination is first published to.
pub(crate) struct CallCounts {
    pub(crate) action: &'static str,
    ok: Counter,
    error: Counter,
    entries: Histogram,
}

impl CallCounts {
    pub(crate) fn new(destination: &str, action: &'static str) -> Self {
        describe();
        let destination = destination.to_owned();
        Self {
            action,
            ok: counter!(CALLS, "queue" => destination.clone(), "action" => action, "result" => "ok"),
            error: counter!(CALLS, "queue" => destination.clone(), "action" => action, "result" => "error"),
            entries: histogram!(BATCH_ENTRIES, "queue" => destination, "action" => action),
        }
    }

    /// One call of `entries` entries ended; `ok` when the service answered it.
    #[allow(clippy::cast_precision_loss)]
    pub(crate) fn call(&self, ok: bool, entries: usize) {
        if ok {
            self.ok.increment(1);
        } else {
            self.error.increment(1);
        }
        self.entries.record(entries as f64);
    }

    /// One call that is not a batch (`CreateTopic`, `Subscribe`) ended.
    #[cfg(feature = "sns")]
    pub(crate) fn single(destination: &str, action: &'static str, ok: bool) {
        describe();
        let result = if ok { "ok" } else { "error" };
        counter!(CALLS, "queue" => destination.to_owned(), "action" => action, "result" => result)
            .increment(1);
    }
}

/// What kind of metric it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// A distribution of observations.
    Histogram,
}

/// One metric the engine emits.
#[derive(Debug, Clone, Copy)]
pub struct MetricInfo {
    /// Its name, as exported.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// Its unit.
    pub unit: Unit,
    /// What it measures.
    pub help: &'static str,
}

const fn info(name: &'static str, kind: MetricKind, unit: Unit, help: &'static str) -> MetricInfo {
    MetricInfo {
        name,
        kind,
        unit,
        help,
    }
}

/// Every metric the engine emits, each labelled with `queue` (and the labels in the table in
/// the module docs).
pub const METRICS: &[MetricInfo] = &[
    info(
        CALLS,
        MetricKind::Counter,
        Unit::Count,
        "SQS calls made, by action and result.",
    ),
    info(
        RECEIVED,
        MetricKind::Counter,
        Unit::Count,
        "Messages received.",
    ),
    info(
        SETTLEMENTS,
        MetricKind::Counter,
        Unit::Count,
        "Settlements answered, by outcome and result.",
    ),
    info(
        BATCH_ENTRIES,
        MetricKind::Histogram,
        Unit::Count,
        "Entries per batch call.",
    ),
    info(
        FLUSHES,
        MetricKind::Counter,
        Unit::Count,
        "Batch calls sent, by flush reason.",
    ),
    info(
        SETTLE_LATENCY,
        MetricKind::Histogram,
        Unit::Seconds,
        "Time from a handler's outcome to SQS's answer for its entry.",
    ),
    info(
        ENTRY_RETRIES,
        MetricKind::Counter,
        Unit::Count,
        "Batch entries sent again after a transient failure.",
    ),
    info(
        LATE,
        MetricKind::Counter,
        Unit::Count,
        "Settlements applied after the message's visibility deadline.",
    ),
    info(
        UNSETTLED,
        MetricKind::Counter,
        Unit::Count,
        "Deliveries dropped without an outcome; they come back when their visibility lapses.",
    ),
    info(
        LAPSED,
        MetricKind::Counter,
        Unit::Count,
        "Messages not handed out because their visibility lapsed while they waited received.",
    ),
    info(
        RETURNED_FOR_ORDER,
        MetricKind::Counter,
        Unit::Count,
        "FIFO messages returned unhandled because an earlier message of their group comes back.",
    ),
    info(
        EXTENSIONS,
        MetricKind::Counter,
        Unit::Count,
        "Visibility extensions by the heartbeat, by result.",
    ),
    info(
        ABANDONED,
        MetricKind::Counter,
        Unit::Count,
        "Long polls still open at shutdown, given up without an answer.",
    ),
    info(
        RECEIVE_COUNT,
        MetricKind::Histogram,
        Unit::Count,
        "Receive count of each delivery.",
    ),
    info(
        LAST_RECEIVE,
        MetricKind::Counter,
        Unit::Count,
        "Deliveries at the last receive the redrive policy allows.",
    ),
    info(
        REDRIVE,
        MetricKind::Counter,
        Unit::Count,
        "Drops at the redrive cap, returned for SQS to move to the dead-letter queue.",
    ),
    info(
        IN_FLIGHT,
        MetricKind::Gauge,
        Unit::Count,
        "Messages received and not yet settled: prefetched, being handled, or with a settlement awaiting SQS's answer.",
    ),
    info(
        HELD_BYTES,
        MetricKind::Gauge,
        Unit::Bytes,
        "Bytes of messages held, bodies and message attributes (each message counted in whole KiB until it is settled).",
    ),
    info(
        RECEIVERS_ACTIVE,
        MetricKind::Gauge,
        Unit::Count,
        "Long-poll receivers running: as many as keep up with the queue, up to the receivers setting.",
    ),
    info(
        BATCHES_IN_FLIGHT,
        MetricKind::Gauge,
        Unit::Count,
        "Settlement batch calls awaiting SQS's answer, by action.",
    ),
    info(
        PARKED,
        MetricKind::Gauge,
        Unit::Count,
        "Messages returned with a delay (retry_after) whose delay has not ended: invisible in SQS, held by no consumer.",
    ),
    info(
        PREFETCHED,
        MetricKind::Gauge,
        Unit::Count,
        "Messages received and waiting for a worker.",
    ),
    info(
        HANDLERS_RUNNING,
        MetricKind::Gauge,
        Unit::Count,
        "Handler invocations running.",
    ),
    info(
        WORKERS,
        MetricKind::Gauge,
        Unit::Count,
        "Handler invocations allowed at once.",
    ),
    info(
        HANDLER_DURATION,
        MetricKind::Histogram,
        Unit::Seconds,
        "Time a handler invocation took.",
    ),
    info(
        OLDEST_AGE,
        MetricKind::Gauge,
        Unit::Seconds,
        "Age, from its SentTimestamp, of the oldest message of the latest receive.",
    ),
];

/// Describes every metric the engine emits to the installed recorder. The engine calls it when
/// a queue opens; calling it again does nothing.
pub fn describe() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for metric in METRICS {
            match metric.kind {
                MetricKind::Counter => describe_counter!(metric.name, metric.unit, metric.help),
                MetricKind::Gauge => describe_gauge!(metric.name, metric.unit, metric.help),
                MetricKind::Histogram => {
                    describe_histogram!(metric.name, metric.unit, metric.help)
                }
            }
        }
    });
}

/// The metric handles of one queue, registered once.
pub(crate) struct QueueMetrics {
    /// The exported counter of each [`Tally`], by its index; the engine's cell of each is in
    /// `stats`.
    counts: [Counter; TALLIES],
    batch_entries: [Histogram; 2],
    flushes: [[Counter; 4]; 2],
    settle_latency: [Histogram; 2],
    entry_retries: [Counter; 2],
    receive_count: Histogram,
    in_flight: Gauge,
    prefetched: Gauge,
    parked: Arc<Parked>,
    handlers_running: Gauge,
    workers: Gauge,
    handler_duration: Histogram,
    oldest_age: Gauge,
    held_bytes: Gauge,
    receivers_active: Gauge,
    batches_in_flight: [Gauge; 2],
    stats: Arc<StatsCells>,
}

impl QueueMetrics {
    pub(crate) fn new(queue: &str, stats: Arc<StatsCells>) -> Self {
        describe();
        let counts = Tally::all().map(|tally| tally.register(queue));
        let queue = queue.to_owned();
        let lane_action = |lane: Lane| Action::of_lane(lane).as_str();
        Self {
            counts,
            batch_entries: Lane::ALL.map(|lane| {
                histogram!(BATCH_ENTRIES, "queue" => queue.clone(), "action" => lane_action(lane))
            }),
            flushes: Lane::ALL.map(|lane| {
                FlushReason::ALL.map(|reason| {
                    counter!(FLUSHES, "queue" => queue.clone(), "action" => lane_action(lane), "reason" => reason.as_str())
                })
            }),
            settle_latency: Lane::ALL.map(|lane| {
                histogram!(SETTLE_LATENCY, "queue" => queue.clone(), "action" => lane_action(lane))
            }),
            entry_retries: Lane::ALL.map(|lane| {
                counter!(ENTRY_RETRIES, "queue" => queue.clone(), "action" => lane_action(lane))
            }),
            receive_count: histogram!(RECEIVE_COUNT, "queue" => queue.clone()),
            in_flight: gauge!(IN_FLIGHT, "queue" => queue.clone()),
            prefetched: gauge!(PREFETCHED, "queue" => queue.clone()),
            parked: Arc::new(Parked::new(gauge!(PARKED, "queue" => queue.clone()))),
            handlers_running: gauge!(HANDLERS_RUNNING, "queue" => queue.clone()),
            workers: gauge!(WORKERS, "queue" => queue.clone()),
            handler_duration: histogram!(HANDLER_DURATION, "queue" => queue.clone()),
            oldest_age: gauge!(OLDEST_AGE, "queue" => queue.clone()),
            held_bytes: gauge!(HELD_BYTES, "queue" => queue.clone()),
            receivers_active: gauge!(RECEIVERS_ACTIVE, "queue" => queue.clone()),
            batches_in_flight: [Lane::Delete, Lane::Visibility].map(|lane| {
                gauge!(BATCHES_IN_FLIGHT, "queue" => queue.clone(), "action" => Action::of_lane(lane).as_str())
            }),
            stats,
        }
    }

    /// The counts so far.
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> Stats {
        self.stats.snapshot()
    }

    /// Counts `n` more of `tally`, for exporters and in the engine's cells.
    fn count(&self, tally: Tally, n: u64) {
        self.counts[tally.index()].increment(n);
        self.stats.add(tally, n);
    }

    pub(crate) fn call(&self, action: Action, ok: bool) {
        self.count(Tally::Call(action, ok), 1);
    }

    pub(crate) fn received(&self, messages: usize) {
        self.count(Tally::Received, messages as u64);
    }

    pub(crate) fn settled(&self, outcome: &Outcome, ok: bool, lane: Lane, latency_secs: f64) {
        self.count(Tally::Settled(outcome.index(), ok), 1);
        self.settle_latency[lane.index()].record(latency_secs);
        // SQS applied the delay: the message is invisible, and no consumer holds it.
        if let (Outcome::RetryAfter(delay), true) = (outcome, ok) {
            self.parked.park(*delay);
        }
    }

    /// The queue's parked messages, which a task counts out as their delays end
    /// ([`crate::metrics::parked::expire`]).
    pub(crate) fn parked(&self) -> &Arc<Parked> {
        &self.parked
    }

    pub(crate) fn flushed(&self, lane: Lane, reason: FlushReason, entries: usize) {
        self.flushes[lane.index()][reason.index()].increment(1);
        self.batch_entries[lane.index()].record(entries as f64);
        self.count(Tally::Entries(lane), entries as u64);
    }

    pub(crate) fn entries_retried(&self, lane: Lane, entries: usize) {
        self.entry_retries[lane.index()].increment(entries as u64);
        self.count(Tally::Entries(lane), entries as u64);
    }

    pub(crate) fn late(&self) {
        self.count(Tally::Late, 1);
    }

    pub(crate) fn extension(&self, ok: bool) {
        self.count(Tally::Extension(ok), 1);
    }

    pub(crate) fn receive_abandoned(&self) {
        self.count(Tally::Abandoned, 1);
    }

    pub(crate) fn delivered(&self, receive_count: u32, at_last_receive: bool) {
        self.receive_count.record(f64::from(receive_count));
        if at_last_receive {
            self.count(Tally::LastReceive, 1);
        }
    }

    pub(crate) fn redrive(&self) {
        self.count(Tally::Redrive, 1);
    }

    /// A message is now held by the engine (`+1`) or no longer (`-1`).
    pub(crate) fn in_flight(&self, delta: f64) {
        self.in_flight.increment(delta);
        if delta >= 0.0 {
            self.stats.hold(delta as u64);
        } else {
            self.stats.release((-delta) as u64);
        }
    }

    /// Bodies of this many bytes are now held (`+n`) or no longer (`-n`).
    pub(crate) fn held_bytes(&self, delta: f64) {
        self.held_bytes.increment(delta);
    }

    /// This many receivers run now.
    pub(crate) fn receivers_active(&self, receivers: f64) {
        self.receivers_active.set(receivers);
    }

    /// A settlement batch call of `lane` started (`+1`) or was answered (`-1`).
    pub(crate) fn batches_in_flight(&self, lane: Lane, delta: f64) {
        self.batches_in_flight[lane.index()].increment(delta);
    }

    /// Messages now wait for a worker (`+n`) or no longer (`-n`).
    pub(crate) fn prefetched(&self, delta: f64) {
        self.prefetched.increment(delta);
    }

    pub(crate) fn workers(&self, workers: usize) {
        self.workers.set(workers as f64);
    }

    /// A handler invocation started.
    pub(crate) fn handler_started(&self) {
        self.handlers_running.increment(1.0);
    }

    /// A handler invocation ended (or was dropped) after `seconds`.
    pub(crate) fn handler_ended(&self, seconds: f64) {
        self.handlers_running.decrement(1.0);
        self.handler_duration.record(seconds);
    }

    pub(crate) fn oldest_age(&self, seconds: f64) {
        self.oldest_age.set(seconds);
    }

    pub(crate) fn unsettled(&self) {
        self.count(Tally::Unsettled, 1);
    }

    /// A message received was not handed out: its visibility had lapsed.
    pub(crate) fn lapsed(&self) {
        self.count(Tally::Lapsed, 1);
    }

    pub(crate) fn returned_for_order(&self) {
        self.count(Tally::ReturnedForOrder, 1);
    }
}
