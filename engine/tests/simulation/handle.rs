//! One handler call, as the workload scripts it: the same whichever way the consumer receives
//! (the engine's native API or the RustStream broker).

use crate::record::{Event, Record};
use crate::workload::{End, Workload};

/// What a handler's deliberate panic says: the panic hook keeps quiet about it.
pub const PANIC_MARKER: &str = "simulated handler panic";

/// One handler call: does what the workload says for this receive of the message, and says
/// how it ends.
pub async fn handle(
    consumer: usize,
    record: &Record,
    workload: &Workload,
    visibility: u32,
    message_id: String,
    receive_count: u32,
    body: &str,
) -> End {
    record.push(Event::Started {
        consumer,
        message_id: message_id.clone(),
        receive_count,
    });
    let behaviour = workload.behaviour(body, receive_count, visibility);
    tokio::time::sleep(behaviour.work).await;
    record.push(Event::Ended {
        consumer,
        message_id,
        receive_count,
        end: behaviour.end,
    });
    behaviour.end
}
