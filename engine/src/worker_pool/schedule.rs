//! Which lane of a shared worker pool gets the next free worker: a pure state (no I/O, no
//! clock, no tasks) that the pool's handle drives.
//!
//! A lane is active from its first request for a worker until it says it is idle (it has no
//! message waiting for a worker). A worker that frees up goes to an active lane: one of the
//! highest priority, and among those the one with the smallest pass. Each grant moves the
//! lane's pass forward by its stride (a constant over its weight), so that lanes of one
//! priority get workers in proportion to their weights (stride scheduling). The worker goes to
//! the lane's oldest waiter, or, when the lane is between two requests (its dispatch is handing
//! the last worker a message), it is kept for the lane's next request: a lane that is busy
//! but not waiting at the instant a worker frees up does not lose its turn to a lower one. An
//! idle lane gives back the workers kept for it. A lane that becomes active again starts at the
//! pass its priority has reached, so it cannot save up turns while idle.

use std::collections::{BTreeMap, VecDeque};

/// A lane's pass moves by this over its weight with each worker it is given.
const STRIDE: u64 = 1 << 32;

/// A waiter's identity, chosen by the caller and unique within a schedule.
pub(crate) type Token = u64;

/// One lane: how it shares the workers, its pass, and its demand.
#[derive(Debug)]
struct Lane {
    priority: u8,
    stride: u64,
    pass: u64,
    /// Between its first request and [`Schedule::idle`].
    active: bool,
    /// Workers given to the lane while none of its requests waited: its next requests take them.
    kept: usize,
    /// Its requests waiting for a worker, oldest first.
    waiting: VecDeque<Token>,
}

/// The free workers of a pool and the lanes that want them.
#[derive(Debug)]
pub(crate) struct Schedule {
    free: usize,
    lanes: Vec<Lane>,
    /// The pass of the last grant made in each priority (the priority's virtual time).
    reached: BTreeMap<u8, u64>,
}

impl Schedule {
    /// A pool of `workers` free workers and no lanes yet.
    pub(crate) fn new(workers: usize) -> Self {
        Self {
            free: workers,
            lanes: Vec::new(),
            reached: BTreeMap::new(),
        }
    }

    /// Adds an idle lane of `priority` (higher first) and `weight` (at least 1) and returns its
    /// index.
    pub(crate) fn add_lane(&mut self, priority: u8, weight: u32) -> usize {
        self.lanes.push(Lane {
            priority,
            stride: STRIDE / u64::from(weight.max(1)),
            pass: 0,
            active: false,
            kept: 0,
            waiting: VecDeque::new(),
        });
        self.lanes.len() - 1
    }

    /// `token` of `lane` asks for a worker: `true` when it gets one now (kept for the lane, or
    /// free), `false` when it waits for [`release`](Self::release) to hand it one. The lane is
    /// active from now on.
    pub(crate) fn acquire(&mut self, lane: usize, token: Token) -> bool {
        if self.take_now(lane) {
            return true;
        }
        self.lanes[lane].waiting.push_back(token);
        false
    }

    /// A worker for `lane` without waiting, when one is kept for it or free. The lane is active
    /// from now on.
    pub(crate) fn try_acquire(&mut self, lane: usize) -> bool {
        self.take_now(lane)
    }

    fn take_now(&mut self, index: usize) -> bool {
        let reached = self.reached.get(&self.lanes[index].priority).copied();
        let lane = &mut self.lanes[index];
        if !lane.active {
            lane.active = true;
            lane.pass = lane.pass.max(reached.unwrap_or(0));
        }
        if lane.kept > 0 {
            lane.kept -= 1;
            return true;
        }
        // A free worker means that no lane wants one: a released worker goes to a lane first.
        if self.free > 0 {
            self.free -= 1;
            return true;
        }
        false
    }

    /// `token` of `lane` no longer waits. `false` when it was not waiting: a worker was
    /// already handed to it, and the caller must release that one.
    pub(crate) fn cancel(&mut self, lane: usize, token: Token) -> bool {
        let waiting = &mut self.lanes[lane].waiting;
        match waiting.iter().position(|&waiter| waiter == token) {
            Some(at) => {
                waiting.remove(at);
                true
            }
            None => false,
        }
    }

    /// `lane` has no message waiting for a worker: the workers kept for it go to the other
    /// lanes, and the waiters they are handed to are returned.
    pub(crate) fn idle(&mut self, index: usize) -> Vec<(usize, Token)> {
        let lane = &mut self.lanes[index];
        lane.active = false;
        let kept = std::mem::take(&mut lane.kept);
        // Its turns not taken are not counted against it.
        lane.pass = lane
            .pass
            .saturating_sub(lane.stride.saturating_mul(kept as u64));
        (0..kept).filter_map(|_| self.release()).collect()
    }

    /// A worker is done: the waiter it goes to (its lane and token), or `None` when it is kept
    /// for an active lane between two requests, or free again.
    pub(crate) fn release(&mut self) -> Option<(usize, Token)> {
        let next = self
            .lanes
            .iter()
            .enumerate()
            .filter(|(_, lane)| lane.active || !lane.waiting.is_empty())
            // The highest priority, then the smallest pass, then the first lane added.
            .max_by(|(a_index, a), (b_index, b)| {
                a.priority
                    .cmp(&b.priority)
                    .then(b.pass.cmp(&a.pass))
                    .then(b_index.cmp(a_index))
            })
            .map(|(index, _)| index);
        let Some(index) = next else {
            self.free += 1;
            return None;
        };
        let lane = &mut self.lanes[index];
        self.reached.insert(lane.priority, lane.pass);
        lane.pass = lane.pass.saturating_add(lane.stride);
        match lane.waiting.pop_front() {
            Some(token) => Some((index, token)),
            None => {
                lane.kept += 1;
                None
            }
        }
    }

    /// Workers free now.
    #[cfg(test)]
    pub(crate) fn free(&self) -> usize {
        self.free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A schedule with every worker busy and `waiters` requests waiting on each of `lanes`,
    /// whose tokens are `lane * 1000 + n`.
    fn contended(workers: usize, lanes: &[(u8, u32)], waiters: u64) -> Schedule {
        let mut schedule = Schedule::new(workers);
        let busy = schedule.add_lane(u8::MAX, 1);
        for _ in 0..workers {
            assert!(schedule.try_acquire(busy));
        }
        assert!(schedule.idle(busy).is_empty());
        for &(priority, weight) in lanes {
            let lane = schedule.add_lane(priority, weight);
            for n in 0..waiters {
                assert!(!schedule.acquire(lane, lane as u64 * 1000 + n));
            }
        }
        schedule
    }

    /// The lanes that the next `grants` released workers are handed to (a lane that wants more
    /// asks again at once, so that it always waits).
    fn grants(schedule: &mut Schedule, grants: usize) -> Vec<usize> {
        (0..grants)
            .map(|n| {
                let (lane, _) = schedule.release().expect("a request waits");
                assert!(!schedule.acquire(lane, 1_000_000 + n as u64));
                lane
            })
            .collect()
    }

    #[test]
    fn a_free_worker_is_taken_at_once_and_comes_back_when_nobody_wants_it() {
        let mut schedule = Schedule::new(2);
        let lane = schedule.add_lane(0, 1);
        assert!(schedule.acquire(lane, 1));
        assert!(schedule.try_acquire(lane));
        assert!(!schedule.try_acquire(lane), "both taken");
        assert!(!schedule.acquire(lane, 2));
        assert_eq!(schedule.release(), Some((lane, 2)), "handed to the waiter");
        assert_eq!(schedule.free(), 0);
        assert_eq!(schedule.idle(lane), []);
        assert_eq!(schedule.release(), None);
        assert_eq!(schedule.release(), None);
        assert_eq!(schedule.free(), 2);
    }

    #[test]
    fn a_higher_priority_is_served_first_while_it_wants_workers() {
        let mut schedule = contended(1, &[(0, 1), (2, 1), (1, 1)], 3);
        let (low, high, middle) = (1, 2, 3);
        let served: Vec<_> = (0..3)
            .map(|_| schedule.release().expect("waits").0)
            .collect();
        assert_eq!(served, [high; 3]);
        // Still active: the next worker is kept for it, until it says it is idle.
        assert_eq!(schedule.release(), None);
        assert!(schedule.try_acquire(high), "kept for it");
        assert_eq!(schedule.release(), None);
        assert_eq!(
            schedule.idle(high),
            [(middle, 3000)],
            "given on to the next priority"
        );
        let served: Vec<_> = (0..2)
            .map(|_| schedule.release().expect("waits").0)
            .collect();
        assert_eq!(served, [middle; 2]);
        assert_eq!(schedule.idle(middle), []);
        let served: Vec<_> = (0..3)
            .map(|_| schedule.release().expect("waits").0)
            .collect();
        assert_eq!(served, [low; 3]);
    }

    #[test]
    fn a_busy_lane_between_two_requests_keeps_its_turn() {
        // Two workers free up at once while the high lane is handing its last worker a message:
        // both stay with it rather than the second going to the low lane that waits.
        let mut schedule = contended(2, &[(0, 1), (1, 1)], 1);
        let (low, high) = (1, 2);
        assert_eq!(schedule.release(), Some((high, 2000)));
        assert_eq!(schedule.release(), None, "kept for the high lane");
        assert!(schedule.try_acquire(high));
        assert!(!schedule.acquire(low, 7));
        assert_eq!(schedule.idle(high), []);
        assert_eq!(schedule.release(), Some((low, 1000)));
        assert_eq!(schedule.release(), Some((low, 7)));
    }

    #[test]
    fn lanes_of_one_priority_share_the_workers_by_weight() {
        let mut schedule = contended(4, &[(0, 3), (0, 1)], 1);
        let (heavy, light) = (1, 2);
        let served = grants(&mut schedule, 400);
        assert_eq!(served.iter().filter(|&&lane| lane == heavy).count(), 300);
        // The shares hold over any stretch, not only the whole run.
        for window in served.chunks(8) {
            let heavy = window.iter().filter(|&&lane| lane == heavy).count();
            assert_eq!(heavy, 6, "{window:?}");
        }
        assert!(served.contains(&light));
    }

    #[test]
    fn equal_weights_take_turns() {
        let mut schedule = contended(1, &[(0, 1), (0, 1), (0, 1)], 1);
        assert_eq!(grants(&mut schedule, 6), [1, 2, 3, 1, 2, 3]);
    }

    #[test]
    fn a_lane_that_was_idle_saves_up_no_turns() {
        let mut schedule = contended(1, &[(0, 1)], 1);
        let busy = 1;
        let idle = schedule.add_lane(0, 1);
        // The busy lane runs alone for a while.
        assert_eq!(grants(&mut schedule, 50), vec![busy; 50]);
        // Then the idle one wakes: they alternate, rather than the idle lane taking 50 turns.
        assert!(!schedule.acquire(idle, 5000));
        let served = grants(&mut schedule, 10);
        let woken = served.iter().filter(|&&lane| lane == idle).count();
        assert!((4..=6).contains(&woken), "{served:?}");
    }

    #[test]
    fn a_cancelled_waiter_is_skipped_and_a_served_one_is_not_cancelled() {
        let mut schedule = contended(1, &[(0, 1)], 2);
        assert!(schedule.cancel(1, 1000));
        assert!(!schedule.cancel(1, 1000), "no longer waiting");
        assert_eq!(schedule.release(), Some((1, 1001)));
        assert!(
            !schedule.cancel(1, 1001),
            "already served: the caller releases it"
        );
        assert_eq!(schedule.idle(1), []);
        assert_eq!(schedule.release(), None);
        assert_eq!(schedule.free(), 1);
    }
}
