//! What the handlers alone allow: a scenario's handlers, `workers` at once, run over its
//! messages with no SQS at all.
//!
//! A scenario whose handlers await simulated I/O is bounded by them, not by the queue: 64
//! handlers of 5 ms move at most 64 / 5 ms = 12,800 messages a second. On tokio's timer a 5 ms
//! sleep ends on the first millisecond tick past its deadline, so on a real machine it takes
//! closer to 6 ms, and the bound is lower than the nominal figure. The comparison measures it
//! in the same run, on a runtime of its own while no system runs, and rates each system
//! against the lower of it and the raw ceiling.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use serde::Serialize;
use tokio::time::Instant;

use super::scenario::Scenario;
use crate::behaviour::Behaviour;
use crate::server::Latency;

/// One measurement of the handlers alone.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct HandlersAlone {
    /// The scenario's kind, as its row names it.
    pub(crate) scenario: super::scenario::ScenarioKind,
    /// The latency of the scenario it stands beside (the handlers alone make no calls).
    pub(crate) latency: Latency,
    /// Messages a second the handlers finished.
    pub(crate) messages_per_sec: f64,
}

/// Whether `scenario` is bounded by its handlers: they await simulated I/O, on a queue
/// filled up front, with no order to keep.
pub(crate) fn applies(scenario: &Scenario) -> bool {
    !scenario.behaviour.delay.is_zero()
        && !scenario.light
        && scenario.fifo_groups.is_none()
        && scenario.visibility_secs.is_none()
}

/// Runs `scenario`'s handlers over its messages, `workers` at once, on a runtime of its own
/// (tokio's default for the machine, as the systems have), and returns what it measured.
///
/// # Errors
///
/// When the runtime cannot be built.
pub(crate) fn measure(scenario: &Scenario, workers: usize) -> Result<HandlersAlone> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .context("building a runtime for the handlers alone")?;
    let messages = scenario.messages;
    let seconds = runtime.block_on(run(scenario.behaviour, workers.max(1), messages));
    Ok(HandlersAlone {
        scenario: scenario.kind,
        latency: scenario.latency,
        messages_per_sec: crate::report::per_sec(messages, seconds),
    })
}

/// Seconds `workers` handlers take to handle `messages`, each message deciding its own wait
/// as in a system's handler.
async fn run(behaviour: Behaviour, workers: usize, messages: u64) -> f64 {
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handlers: Vec<_> = (0..workers)
        .map(|_| {
            let next = Arc::clone(&next);
            tokio::spawn(async move {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= messages {
                        break;
                    }
                    let decision = behaviour.decide(&format!("loadtest message {index}"), 1);
                    tokio::time::sleep(decision.wait).await;
                }
            })
        })
        .collect();
    for handler in handlers {
        // A handler that panicked has nothing left to count.
        let _ = handler.await;
    }
    started.elapsed().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::compare::scenario::ScenarioKind;

    #[test]
    fn only_handlers_that_wait_on_a_plain_queue_bound_a_scenario() {
        let sized = |kind| Scenario::sized(kind, 0.01, 64);
        assert!(applies(&sized(ScenarioKind::Io5ms)));
        assert!(applies(&sized(ScenarioKind::Io50ms)));
        assert!(!applies(&sized(ScenarioKind::AckOnly)));
        assert!(!applies(&sized(ScenarioKind::Mixed)));
        assert!(!applies(&sized(ScenarioKind::Heartbeat)));
        assert!(!applies(&sized(ScenarioKind::Fifo)));
        assert!(!applies(&sized(ScenarioKind::Light)));
    }

    #[tokio::test(start_paused = true)]
    async fn handlers_alone_take_a_wait_per_round_of_workers() {
        let behaviour = Behaviour {
            delay: Duration::from_millis(5),
            ..Behaviour::default()
        };
        // 100 messages over 10 handlers: ten rounds of 5 ms on the paused clock.
        let seconds = run(behaviour, 10, 100).await;
        assert!(
            (0.050..0.056).contains(&seconds),
            "ten rounds of 5 ms took {seconds} s"
        );
    }
}
