//! The names the engine exports: each metric's, and the SQS actions it labels calls with.

use crate::sqs::lane::Lane;

/// The SQS actions the engine calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    ReceiveMessage,
    DeleteMessageBatch,
    ChangeMessageVisibilityBatch,
    GetQueueUrl,
    GetQueueAttributes,
    SetQueueAttributes,
    CreateQueue,
}

impl Action {
    pub(super) const ALL: [Action; 7] = [
        Action::ReceiveMessage,
        Action::DeleteMessageBatch,
        Action::ChangeMessageVisibilityBatch,
        Action::GetQueueUrl,
        Action::GetQueueAttributes,
        Action::SetQueueAttributes,
        Action::CreateQueue,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::ReceiveMessage => "ReceiveMessage",
            Action::DeleteMessageBatch => "DeleteMessageBatch",
            Action::ChangeMessageVisibilityBatch => "ChangeMessageVisibilityBatch",
            Action::GetQueueUrl => "GetQueueUrl",
            Action::GetQueueAttributes => "GetQueueAttributes",
            Action::SetQueueAttributes => "SetQueueAttributes",
            Action::CreateQueue => "CreateQueue",
        }
    }

    pub(crate) fn of_lane(lane: Lane) -> Action {
        match lane {
            Lane::Delete => Action::DeleteMessageBatch,
            Lane::Visibility => Action::ChangeMessageVisibilityBatch,
        }
    }
}

pub(super) const CALLS: &str = "sqs_engine_calls_total";
pub(super) const RECEIVED: &str = "sqs_engine_messages_received_total";
pub(super) const SETTLEMENTS: &str = "sqs_engine_settlements_total";
pub(super) const BATCH_ENTRIES: &str = "sqs_engine_batch_entries";
pub(super) const FLUSHES: &str = "sqs_engine_flushes_total";
pub(super) const SETTLE_LATENCY: &str = "sqs_engine_settlement_latency_seconds";
pub(super) const ENTRY_RETRIES: &str = "sqs_engine_entry_retries_total";
pub(super) const LATE: &str = "sqs_engine_late_settlements_total";
pub(super) const UNSETTLED: &str = "sqs_engine_unsettled_total";
pub(super) const RETURNED_FOR_ORDER: &str = "sqs_engine_returned_for_order_total";
pub(super) const LAPSED: &str = "sqs_engine_lapsed_total";
pub(super) const EXTENSIONS: &str = "sqs_engine_heartbeat_extensions_total";
pub(super) const ABANDONED: &str = "sqs_engine_receives_abandoned_total";
pub(super) const RECEIVE_COUNT: &str = "sqs_engine_receive_count";
pub(super) const LAST_RECEIVE: &str = "sqs_engine_last_receive_deliveries_total";
pub(super) const REDRIVE: &str = "sqs_engine_redrive_returns_total";
pub(super) const IN_FLIGHT: &str = "sqs_engine_messages_in_flight";
pub(super) const PREFETCHED: &str = "sqs_engine_messages_prefetched";
pub(super) const PARKED: &str = "sqs_engine_messages_parked";
pub(super) const HANDLERS_RUNNING: &str = "sqs_engine_handlers_running";
pub(super) const WORKERS: &str = "sqs_engine_workers";
pub(super) const HANDLER_DURATION: &str = "sqs_engine_handler_duration_seconds";
pub(super) const OLDEST_AGE: &str = "sqs_engine_oldest_message_age_seconds";
pub(super) const HELD_BYTES: &str = "sqs_engine_messages_held_bytes";
pub(super) const RECEIVERS_ACTIVE: &str = "sqs_engine_receivers_active";
pub(super) const BATCHES_IN_FLIGHT: &str = "sqs_engine_settle_batches_in_flight";
