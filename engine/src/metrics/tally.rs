//! [`Tally`]: each count the engine keeps for [`Stats`](super::Stats) and exports through the
//! `metrics` facade, named once, so that one call counts it for both.

use metrics::{Counter, counter};

use super::names::{
    ABANDONED, Action, CALLS, EXTENSIONS, LAPSED, LAST_RECEIVE, LATE, RECEIVED, REDRIVE,
    RETURNED_FOR_ORDER, SETTLEMENTS, UNSETTLED,
};
use crate::handle::outcome::Outcome;
use crate::sqs::lane::Lane;

/// One count: an index into a queue's exported counters and into the engine's cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tally {
    /// Calls of an action, answered (`true`) or failed.
    Call(Action, bool),
    /// Messages received.
    Received,
    /// Settlements of the outcome with this index ([`Outcome::NAMES`]), answered or failed.
    Settled(usize, bool),
    /// Entries sent on a lane, retries included. Not a counter of its own for exporters: they
    /// see the entries per call and the entries retried.
    Entries(Lane),
    /// Settlements applied after the message's visibility deadline.
    Late,
    /// Deliveries dropped without an outcome.
    Unsettled,
    /// Messages let go because their visibility lapsed while they waited.
    Lapsed,
    /// FIFO messages returned unhandled for their group's order.
    ReturnedForOrder,
    /// Heartbeat extensions, answered or failed.
    Extension(bool),
    /// Deliveries at the last receive the redrive policy allows.
    LastReceive,
    /// Drops at the redrive cap, returned for the dead-letter queue.
    Redrive,
    /// Long polls given up at shutdown.
    Abandoned,
}

/// How many counts there are: the length of the arrays [`Tally::index`] indexes.
pub(crate) const TALLIES: usize = 34;

const fn failed(ok: bool) -> usize {
    if ok { 0 } else { 1 }
}

impl Tally {
    /// Its place, `0..TALLIES`: each count has its own.
    pub(crate) const fn index(self) -> usize {
        match self {
            Tally::Call(action, ok) => action as usize * 2 + failed(ok),
            Tally::Received => 14,
            Tally::Settled(outcome, ok) => 15 + outcome * 2 + failed(ok),
            Tally::Entries(Lane::Delete) => 23,
            Tally::Entries(Lane::Visibility) => 24,
            Tally::Late => 25,
            Tally::Unsettled => 26,
            Tally::Lapsed => 27,
            Tally::ReturnedForOrder => 28,
            Tally::Extension(ok) => 29 + failed(ok),
            Tally::LastReceive => 31,
            Tally::Redrive => 32,
            Tally::Abandoned => 33,
        }
    }

    /// Every count, in the order of their indices.
    pub(crate) fn all() -> [Tally; TALLIES] {
        let mut all = [Tally::Received; TALLIES];
        let both = [true, false];
        let counts = Action::ALL
            .into_iter()
            .flat_map(|action| both.map(|ok| Tally::Call(action, ok)))
            .chain([Tally::Received])
            .chain(
                (0..Outcome::NAMES.len())
                    .flat_map(|outcome| both.map(|ok| Tally::Settled(outcome, ok))),
            )
            .chain(Lane::ALL.map(Tally::Entries))
            .chain([
                Tally::Late,
                Tally::Unsettled,
                Tally::Lapsed,
                Tally::ReturnedForOrder,
            ])
            .chain(both.map(Tally::Extension))
            .chain([Tally::LastReceive, Tally::Redrive, Tally::Abandoned]);
        for tally in counts {
            all[tally.index()] = tally;
        }
        all
    }

    /// Its counter for exporters, labelled with `queue`.
    pub(crate) fn register(self, queue: &str) -> Counter {
        let queue = queue.to_owned();
        let result = |ok| if ok { "ok" } else { "error" };
        match self {
            Tally::Call(action, ok) => {
                counter!(CALLS, "queue" => queue, "action" => action.as_str(), "result" => result(ok))
            }
            Tally::Received => counter!(RECEIVED, "queue" => queue),
            Tally::Settled(outcome, ok) => {
                counter!(SETTLEMENTS, "queue" => queue, "outcome" => Outcome::NAMES[outcome], "result" => result(ok))
            }
            Tally::Entries(_) => Counter::noop(),
            Tally::Late => counter!(LATE, "queue" => queue),
            Tally::Unsettled => counter!(UNSETTLED, "queue" => queue),
            Tally::Lapsed => counter!(LAPSED, "queue" => queue),
            Tally::ReturnedForOrder => counter!(RETURNED_FOR_ORDER, "queue" => queue),
            Tally::Extension(ok) => counter!(EXTENSIONS, "queue" => queue, "result" => result(ok)),
            Tally::LastReceive => counter!(LAST_RECEIVE, "queue" => queue),
            Tally::Redrive => counter!(REDRIVE, "queue" => queue),
            Tally::Abandoned => counter!(ABANDONED, "queue" => queue),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_count_has_its_own_index_and_every_index_a_count() {
        let all = Tally::all();
        let mut seen = [false; TALLIES];
        for (place, tally) in all.iter().enumerate() {
            assert_eq!(tally.index(), place, "{tally:?}");
            assert!(!seen[place], "{tally:?} shares its index");
            seen[place] = true;
        }
        assert_eq!(Action::ALL.len() * 2, Tally::Received.index());
        assert_eq!(
            Tally::Settled(Outcome::NAMES.len() - 1, false).index() + 1,
            Tally::Entries(Lane::Delete).index()
        );
    }
}
