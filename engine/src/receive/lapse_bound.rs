//! How many messages may wait received while the heartbeat is off: no more than the workers
//! start before the messages' visibility lapses. Pure: it takes the rates and counts.
//!
//! With the heartbeat on, a message waiting for a worker stays invisible however long it
//! waits. With it off, its visibility timeout runs from the receive: a prefetch fuller than the
//! workers get through in that time holds messages that lapse (SQS hands them out again, and
//! each receive counts toward the redrive policy's cap). The receivers keep the messages
//! waiting within what the workers start in half a visibility timeout, the other half left to
//! the spread of the handlers' times and the receive's own round trip. A message that lapses
//! all the same is let go unhandled ([`Delivery::lapsed`](super::delivery::Delivery::lapsed)).

use std::time::Duration;

/// The most messages that may wait received now; `None` when nothing bounds them: the
/// heartbeat is on or the visibility timeout is zero (`lapse_window` is `None`), or how fast the
/// workers could take messages is not known yet (`could_take`, messages a second: see
/// [`WorkerCapacity`](super::worker_capacity::WorkerCapacity)).
pub(crate) fn waiting_bound(
    lapse_window: Option<Duration>,
    could_take: Option<f64>,
) -> Option<u64> {
    let startable = could_take? * lapse_window?.as_secs_f64() / 2.0;
    // At least one: a worker that takes longer than the whole window still gets a message.
    Some((startable.floor() as u64).max(1))
}

/// How many messages a receive asks for: a full `batch`, or the room under `bound` beside the
/// `waiting` messages (0: none now; wait until some are taken).
pub(crate) fn messages_to_ask(batch: u8, bound: Option<u64>, waiting: u64) -> u8 {
    match bound {
        None => batch,
        Some(bound) => {
            let room = bound.saturating_sub(waiting);
            u8::try_from(room).map_or(batch, |room| room.min(batch))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREE_SECONDS: Option<Duration> = Some(Duration::from_secs(3));

    #[test]
    fn nothing_bounds_the_waiting_messages_with_the_heartbeat_on_or_before_a_rate_is_known() {
        assert_eq!(waiting_bound(None, Some(1.0)), None, "the heartbeat is on");
        assert_eq!(
            waiting_bound(THREE_SECONDS, None),
            None,
            "no handler ended yet"
        );
        assert_eq!(messages_to_ask(10, None, 500), 10);
    }

    #[test]
    fn the_bound_is_what_the_workers_start_in_half_a_visibility_timeout_and_at_least_one() {
        // 64 workers of 20 ms, a 30 s timeout: far more than a prefetch holds.
        assert_eq!(
            waiting_bound(Some(Duration::from_secs(30)), Some(3_200.0)),
            Some(48_000)
        );
        // One worker of a second, a 3 s timeout: one and a half, so one.
        assert_eq!(waiting_bound(THREE_SECONDS, Some(1.0)), Some(1));
        // One worker of ten seconds: still one.
        assert_eq!(waiting_bound(THREE_SECONDS, Some(0.1)), Some(1));
        assert_eq!(
            waiting_bound(Some(Duration::from_secs(4)), Some(4.0)),
            Some(8)
        );
    }

    #[test]
    fn a_receive_asks_for_the_room_under_the_bound_and_at_most_a_batch() {
        assert_eq!(messages_to_ask(10, Some(8), 0), 8);
        assert_eq!(messages_to_ask(10, Some(8), 5), 3);
        assert_eq!(messages_to_ask(10, Some(8), 8), 0, "full: wait");
        assert_eq!(messages_to_ask(10, Some(8), 20), 0, "over: wait");
        assert_eq!(messages_to_ask(10, Some(48_000), 100), 10);
        assert_eq!(messages_to_ask(1, Some(8), 0), 1);
    }
}
