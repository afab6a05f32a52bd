//! How many receivers a queue runs, as a pure state: [`ReceiverCount`] takes the receivers'
//! events (a receive about to be made, an answer, a failure) and the takers' (waiting for a
//! receive), with `now` and the count of messages taken so far where a rate is measured, and
//! answers what the receiver does next. No I/O, no clock, no tasks: the receivers
//! (`receiver.rs`) hold it under one lock and act on its answers.
//!
//! The policy: between one and `most` receivers run, as many as keep the workers fed. A
//! receive that comes back full while the workers are short of messages starts more; one that
//! comes back partly filled or empty, or full while received messages pile up unstarted, ends
//! its receiver (the last one stays), and so does one that fails in a way a retry may mend
//! (throttled, a server error, no answer in time). So an idle queue costs one long poll at a
//! time, a busy one on a slow link gets as many receives in flight as its round trip needs,
//! slow handlers are not fed faster than they take, and an overloaded or throttling server is
//! left one receive retrying with backoff rather than every receive it timed out.
//!
//! A call of any kind to the queue that fails so (a settlement call included, counted by the
//! queue's [`Pressure`](crate::sqs::pressure::Pressure)) makes the receivers measure their
//! unloaded round trip again with one receive in flight, and cuts them to one until it is
//! known: on a server that serves calls a few at a time, a round trip first measured with
//! eight in flight was already queueing. So does a full receive whose round trip now is more
//! than four times the unloaded one. Measured with one receive in flight, a slower network
//! becomes the unloaded round trip and the receivers grow back; a loaded server answers one
//! receive fast again, and they grow only as far as its round trip stays within twice that.

use std::time::Duration;

use tokio::time::Instant;

use crate::receive::take_rate::TakeRate;
use crate::sqs::round_trip::{LIGHT_IN_FLIGHT, LoadedRoundTrip};

use demand::Demand;

/// Receives in flight worth having per second of a receive's round trip: receivers for at most
/// 60,000 messages a second (ten a receive), whatever the demand. The choice is measured in
/// `docs/benchmarks.md` ("The bounds on calls in flight").
const RECEIVES_PER_ROUND_TRIP_SECOND: f64 = 6_000.0;

/// How many times the messages the workers take now the receives in flight may bring: when
/// receiving is what holds the workers back, the rate they take at doubles every round trip
/// (at most), and when it is not, a second round of receives is ready when the answers bunch.
const DEMAND_HEADROOM: f64 = 2.0;

/// The fewest receivers the engine grows to whatever the round trip: a loaded machine answers
/// loopback calls in well under a millisecond, but its event loop adds its own waits.
pub(crate) const MIN_USEFUL_RECEIVERS: usize = 8;

/// What a receiver does after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// It goes on receiving, and `start` more receivers start beside it.
    Go {
        /// Receivers to start now (already counted as running).
        start: usize,
    },
    /// It ends (it was not the last; already counted off).
    End,
}

impl Next {
    /// Go on, starting none.
    pub(crate) const GO: Self = Self::Go { start: 0 };
}

/// A receive batch that came back and was handed on: what [`ReceiverCount::after_batch`] sizes
/// the receivers by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Answered {
    /// When the call was made.
    pub(crate) called_at: Instant,
    /// Whether it brought a full batch.
    pub(crate) full: bool,
    /// How many of its messages were handed on (counted by [`ReceiverCount::received`]).
    pub(crate) own: usize,
    /// Messages received that left the prefetch so far (handed out, or returned): a total,
    /// counted outside the state, as often as a message is handed out.
    pub(crate) taken: u64,
    /// The queue's [`Pressure`](crate::sqs::pressure::Pressure) marks now.
    pub(crate) pressure: u64,
    /// Receive batches the prefetch has room for now.
    pub(crate) room: usize,
    /// Messages a second the workers could take, if known
    /// ([`WorkerCapacity`](crate::receive::worker_capacity::WorkerCapacity)).
    pub(crate) could_take: Option<f64>,
    /// The cap on messages received a second, if set.
    pub(crate) rate_cap: Option<f64>,
    /// Whether the receivers are stopping.
    pub(crate) stopping: bool,
}

/// The receivers of one queue, counted, and what their count is decided by.
#[derive(Debug)]
pub(crate) struct ReceiverCount {
    /// A full receive batch.
    batch: usize,
    /// The most receivers at once.
    most: usize,
    /// Receivers running.
    active: usize,
    /// Messages received and handed on so far: those not yet taken wait for a worker. Many
    /// waiting means the receivers outrun the workers.
    received: u64,
    /// Takers (the dispatcher, a subscription) waiting for a receive now: the demand signal.
    takers_waiting: usize,
    /// When a taker last stopped waiting for a receive.
    last_wait_end: Option<Instant>,
    /// How long a full receive takes, now and unloaded.
    round_trip: LoadedRoundTrip,
    /// The queue's pressure marks as last heeded.
    pressure_seen: u64,
    /// How fast the messages received are handed out.
    taken: TakeRate,
}

impl ReceiverCount {
    /// No receiver yet, for receives of `batch` messages, at most `most` at once (at least
    /// one).
    pub(crate) fn new(batch: u8, most: usize) -> Self {
        Self {
            batch: usize::from(batch).max(1),
            most: most.max(1),
            active: 0,
            received: 0,
            takers_waiting: 0,
            last_wait_end: None,
            round_trip: LoadedRoundTrip::default(),
            pressure_seen: 0,
            taken: TakeRate::default(),
        }
    }

    /// The first receiver starts.
    pub(crate) fn start_first(&mut self) {
        self.active += 1;
    }

    /// How many receivers run now.
    pub(crate) fn active(&self) -> usize {
        self.active
    }

    /// A receiver handed on `count` messages received, which wait for a worker.
    pub(crate) fn received(&mut self, count: usize) {
        self.received = self.received.saturating_add(count as u64);
    }

    /// Messages received and waiting for a worker, with `taken` of them taken so far (counted
    /// outside the state, as in [`Answered::taken`]).
    pub(crate) fn waiting(&self, taken: u64) -> u64 {
        self.received.saturating_sub(taken)
    }

    /// A taker found nothing received and waits for a receive.
    pub(crate) fn taker_waits(&mut self) {
        self.takers_waiting += 1;
    }

    /// A taker's wait for a receive ended at `now`, answered or not.
    pub(crate) fn taker_done(&mut self, now: Instant) {
        self.takers_waiting = self.takers_waiting.saturating_sub(1);
        self.last_wait_end = Some(self.last_wait_end.map_or(now, |last| last.max(now)));
    }

    /// Before a receive, with the queue's `pressure` marks now: whether the receiver makes it
    /// or ends, being one more than a measurement of the round trip wants. A receiver with a
    /// FIFO attempt to retry makes it.
    pub(crate) fn before_call(&mut self, pressure: u64, retrying_attempt: bool) -> Next {
        self.heed(pressure);
        if !retrying_attempt && self.cut_while_remeasuring() {
            Next::End
        } else {
            Next::GO
        }
    }

    /// A full receive answered in `took`, with the receivers running now in flight.
    pub(crate) fn answered_full(&mut self, took: Duration) {
        self.round_trip.sample(took, self.active);
    }

    /// An empty receive: its receiver ends, unless it is the last.
    pub(crate) fn after_empty(&mut self) -> Next {
        if self.shrink() { Next::End } else { Next::GO }
    }

    /// A receive that brought messages, handed on at `now`: its receiver ends when the
    /// receivers outrun the workers, when the receive was not full, or while the round trip is
    /// measured again; after a full receive while the workers are short of messages, more may
    /// start (see [`grow`](Self::grow)).
    pub(crate) fn after_batch(&mut self, now: Instant, answered: Answered) -> Next {
        self.heed(answered.pressure);
        if answered.full && self.round_trip.overloaded() {
            self.round_trip.remeasure(1);
        }
        let demand = self.demand(&answered);
        if self.cut_while_remeasuring() {
            return Next::End;
        }
        if answered.full && !demand.outrunning(self.active) {
            Next::Go {
                start: self.grow(now, demand, &answered),
            }
        } else if self.shrink() {
            Next::End
        } else {
            Next::GO
        }
    }

    /// A failed receive, with the queue's `pressure` marks now: a receiver whose call failed
    /// in a way a retry may mend ends, unless it is the last or has a FIFO attempt to retry
    /// (it may get what the call took); otherwise it retries after a backoff.
    pub(crate) fn after_failure(
        &mut self,
        pressure: u64,
        transient: bool,
        retrying_attempt: bool,
    ) -> Next {
        self.heed(pressure);
        if transient && !retrying_attempt && self.shrink() {
            Next::End
        } else {
            Next::GO
        }
    }

    /// On news of a call to the queue that failed in a way a retry may mend: the server is
    /// overloaded or throttling, so the unloaded round trip is measured again with one receive
    /// in flight.
    fn heed(&mut self, pressure: u64) {
        if pressure > self.pressure_seen {
            self.pressure_seen = pressure;
            self.round_trip.remeasure(1);
        }
    }

    /// While the unloaded round trip is measured again: whether a receiver ends, being one
    /// more than the measurement wants.
    fn cut_while_remeasuring(&mut self) -> bool {
        self.round_trip.remeasuring() && self.active > self.round_trip.light() && self.shrink()
    }

    /// Whether a receiver ends (it is not the last).
    fn shrink(&mut self) -> bool {
        let shrunk = self.active > 1;
        if shrunk {
            self.active -= 1;
        }
        shrunk
    }

    /// The workers' demand as `answered` came back.
    fn demand(&self, answered: &Answered) -> Demand {
        // A wait that ended as the call began (the one the receive before fed) does not count.
        let waited = self.takers_waiting > 0
            || self
                .last_wait_end
                .is_some_and(|end| end > answered.called_at);
        let waiting = self.received.saturating_sub(answered.taken);
        Demand {
            takers_waited: waited,
            waiting: usize::try_from(waiting)
                .unwrap_or(usize::MAX)
                .saturating_sub(answered.own),
            batch: self.batch,
        }
    }

    /// After a full receive, given the workers' `demand`: how many receivers start, counted as
    /// running. None unless the workers are short of messages (see [`Demand::short`]), the
    /// prefetch has room for their receives, the receivers are not stopping, and the receives
    /// do not queue at SQS (the round trip now stays within twice the unloaded one: past that,
    /// more receives in flight only wait longer, as on a server short of CPU). Then as many
    /// as are worth it at the round trip now and the rate the workers take messages at, or
    /// could take while they wait (see [`useful`](Self::useful) and
    /// [`demand_rate`](Self::demand_rate)).
    ///
    /// Until the unloaded round trip is known, the receivers are the few that measure it, all
    /// started by the first full receive (that many calls in flight do not load a server).
    /// After, two more a full receive, up to those worth it: the receivers at most triple a
    /// round trip, so the round trip shows what the last ones did before the next start.
    fn grow(&mut self, now: Instant, demand: Demand, answered: &Answered) -> usize {
        if answered.room == 0 || !demand.short() || answered.stopping || self.round_trip.queueing()
        {
            return 0;
        }
        let sized = self
            .round_trip
            .unloaded()
            .and(self.round_trip.now())
            .map(|round_trip| {
                let rate = self.demand_rate(now, demand, round_trip, answered);
                self.useful(round_trip, rate)
            });
        let useful = sized.unwrap_or(LIGHT_IN_FLIGHT.min(self.most));
        let step = if sized.is_some() { 2 } else { useful };
        let start = useful
            .saturating_sub(self.active)
            .min(step)
            .min(answered.room);
        self.active += start;
        start
    }

    /// How many receivers are worth running at `round_trip` (a mean, without queueing) while
    /// the workers take, or would take, `demand` messages a second (`None`: not measured yet).
    /// By Little's law, receives in flight = receives a second × round trip: enough for
    /// [`DEMAND_HEADROOM`] times that demand, and for no more than
    /// [`RECEIVES_PER_ROUND_TRIP_SECOND`]; at least [`MIN_USEFUL_RECEIVERS`], at most `most`.
    fn useful(&self, round_trip: Duration, demand: Option<f64>) -> usize {
        let seconds = round_trip.as_secs_f64();
        let by_round_trip = (seconds * RECEIVES_PER_ROUND_TRIP_SECOND).ceil() as usize;
        let batch = self.batch as f64;
        let by_demand = demand.map_or(usize::MAX, |demand| {
            (DEMAND_HEADROOM * demand / batch * seconds).ceil() as usize
        });
        by_round_trip
            .min(by_demand)
            .max(MIN_USEFUL_RECEIVERS)
            .min(self.most)
    }

    /// Messages a second the workers would take, at a round trip of `round_trip`: the rate
    /// they take at now, or, while they wait for messages, what they could take if it is more:
    /// the rate they take at then is only what the receivers bring. Under a rate cap, no more
    /// than it. `None` while none is known.
    fn demand_rate(
        &mut self,
        now: Instant,
        demand: Demand,
        round_trip: Duration,
        answered: &Answered,
    ) -> Option<f64> {
        let taken = self.taken.per_second(now, round_trip, answered.taken);
        let could = answered.could_take.filter(|_| demand.takers_waited);
        let demand = match (taken, could) {
            (Some(taken), Some(could)) => Some(taken.max(could)),
            (taken, could) => taken.or(could),
        };
        match answered.rate_cap {
            Some(cap) => Some(demand.map_or(cap, |demand| demand.min(cap))),
            None => demand,
        }
    }
}

mod demand;
#[cfg(test)]
mod tests;
