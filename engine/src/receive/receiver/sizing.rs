//! How many receivers a queue runs: the growth after full receives, by the round trip and the
//! workers' demand; the end of one after a receive that came back short, or while the
//! round trip is measured again after the server showed overload.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Receivers;
use super::demand::Demand;
use crate::receive::delivery::Delivery;
use crate::sqs::round_trip::LIGHT_IN_FLIGHT;

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
pub(super) const MIN_USEFUL_RECEIVERS: usize = 8;

impl Receivers {
    /// How many receivers are worth running at `round_trip` (a mean, without queueing: see
    /// [`grow`](Self::grow)) while the workers take, or would take, `demand` messages a second
    /// (`None`: not measured yet; see [`demand_rate`](Self::demand_rate)). By Little's law,
    /// receives in flight = receives a second × round trip: enough for [`DEMAND_HEADROOM`]
    /// times that demand, and for no more than [`RECEIVES_PER_ROUND_TRIP_SECOND`]; at least
    /// [`MIN_USEFUL_RECEIVERS`], at most `most`.
    fn useful(&self, round_trip: Duration, demand: Option<f64>) -> usize {
        let seconds = round_trip.as_secs_f64();
        let by_round_trip = (seconds * RECEIVES_PER_ROUND_TRIP_SECOND).ceil() as usize;
        let batch = f64::from(self.config.max_messages.max(1));
        let by_demand = demand.map_or(usize::MAX, |demand| {
            (DEMAND_HEADROOM * demand / batch * seconds).ceil() as usize
        });
        by_round_trip
            .min(by_demand)
            .max(MIN_USEFUL_RECEIVERS)
            .min(self.most)
    }

    /// Messages a second the workers would take, at a round trip of `round_trip`: the rate
    /// they take at now, or, while they wait for messages, what they could take if it is more
    /// (see [`WorkerCapacity`](crate::receive::worker_capacity::WorkerCapacity)): the rate they take at
    /// then is only what the receivers bring. `None` while neither is known.
    fn demand_rate(&self, demand: Demand, round_trip: Duration) -> Option<f64> {
        let taken = self.taken.per_second(Instant::now(), round_trip);
        let could = demand
            .takers_waited
            .then(|| self.queue.capacity.per_second())
            .flatten();
        let demand = match (taken, could) {
            (Some(taken), Some(could)) => Some(taken.max(could)),
            (taken, could) => taken.or(could),
        };
        // Under a rate cap, the receives worth having are those the cap allows.
        match &self.rate {
            Some(rate) => Some(demand.map_or(rate.per_second(), |d| d.min(rate.per_second()))),
            None => demand,
        }
    }

    /// After a full receive, given the workers' `demand`: starts more receivers (handing each
    /// a clone of `out`) when
    /// - the workers are short of messages (see [`Demand::short`]);
    /// - fewer run than are worth it at the round trip now and the rate the workers take
    ///   messages at, or could take while they wait (see [`useful`](Self::useful) and
    ///   [`demand_rate`](Self::demand_rate));
    /// - the receives do not queue at SQS (the round trip now stays within twice the unloaded
    ///   one: past that, more receives in flight only wait longer, as on a server short of
    ///   CPU);
    /// - and the prefetch has room for their receives.
    ///
    /// Until the unloaded round trip is known, the receivers are the few that measure it, all
    /// started by the first full receive (that many calls in flight do not load a server);
    /// while it is measured again after a call failed against an overloaded server, none
    /// start.
    /// After, two more a full receive, up to those worth it: the receivers at most triple a
    /// round trip, so the round trip shows what the last ones did before the next start.
    pub(super) fn grow(self: &Arc<Self>, demand: Demand, out: &mpsc::Sender<Vec<Delivery>>) {
        let room = self.ahead.available_permits() / usize::from(self.config.max_messages).max(1);
        if room == 0 || !demand.short() || self.stop.is_cancelled() || self.round_trip.queueing() {
            return;
        }
        let sized = self
            .round_trip
            .unloaded()
            .and(self.round_trip.now())
            .map(|now| self.useful(now, self.demand_rate(demand, now)));
        let useful = sized.unwrap_or(LIGHT_IN_FLIGHT.min(self.most));
        let mut started = 0;
        let _ = self
            .active
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |active| {
                let step = if sized.is_some() { 2 } else { useful };
                started = useful.saturating_sub(active).min(step).min(room);
                (started > 0).then_some(active + started)
            });
        for _ in 0..started {
            self.spawn(out.clone());
        }
    }

    /// When a call to the queue (a receive or a settlement call) failed in a way a retry may
    /// mend since the last look: the server is overloaded or throttling, so the receivers
    /// measure the unloaded round trip again with one receive in flight, and are cut to one
    /// meanwhile (see [`cut_while_remeasuring`](Self::cut_while_remeasuring)).
    pub(super) fn heed_pressure(&self) {
        if self.queue.pressure.news(&self.pressure_seen) {
            self.round_trip.remeasure(1);
        }
    }

    /// After a receive, while the unloaded round trip is measured again: whether this
    /// receiver ends, being one more than the measurement wants.
    pub(super) fn cut_while_remeasuring(&self) -> bool {
        self.round_trip.remeasuring() && self.active() > self.round_trip.light() && self.shrink()
    }

    /// After a partly filled or empty receive: whether this receiver ends (it is not the last).
    pub(super) fn shrink(&self) -> bool {
        let shrunk = self
            .active
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |active| {
                (active > 1).then(|| active - 1)
            })
            .is_ok();
        if shrunk {
            self.queue.metrics.receivers_active(self.active() as f64);
        }
        shrunk
    }
}
