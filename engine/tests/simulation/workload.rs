//! What one seed runs: the queue, the messages and when they are sent, each consumer's
//! settings and shutdown moment, how often calls fail, and what each handler call does. All of
//! it drawn from the seed, nothing from anywhere else.

use std::time::Duration;

use sqs_engine::{Backoff, MAX_VISIBILITY};

/// One seed's run.
#[derive(Debug, Clone)]
pub struct Workload {
    pub seed: u64,
    pub fifo: bool,
    /// The queue the consumers read.
    pub queue: String,
    /// The dead-letter queue and the receives it allows, when there is a redrive policy.
    pub redrive: Option<(String, u32)>,
    pub messages: Vec<Planned>,
    pub consumers: Vec<ConsumerPlan>,
    /// The chance that a call of a consumer fails one way or another.
    pub fault_rate: f64,
    /// How long a call that hangs takes before the client gives up on it.
    pub call_timeout: Duration,
    pub backoff: Backoff,
}

/// A message to send.
#[derive(Debug, Clone)]
pub struct Planned {
    pub body: String,
    pub group: Option<String>,
    pub send_at: Duration,
}

/// One consumer's settings.
#[derive(Debug, Clone)]
pub struct ConsumerPlan {
    pub receivers: usize,
    pub workers: usize,
    pub prefetch: usize,
    /// The most messages held (received and not yet settled).
    pub max_held: usize,
    pub receive_batch: usize,
    pub wait_time: Duration,
    /// The visibility timeout asked for at each receive, in seconds.
    pub visibility: u32,
    pub heartbeat: bool,
    pub max_batch_wait: Duration,
    pub shutdown_at: Duration,
    pub shutdown_timeout: Duration,
    /// Through the RustStream broker rather than the engine's own API (never without the
    /// `ruststream` feature). The broker's
    /// subscriptions take the receivers, workers, wait, visibility and heartbeat from here and
    /// keep the engine's defaults for the rest; `max_batch_wait` is their batch window.
    pub broker: bool,
}

impl ConsumerPlan {
    /// The most messages the consumer may hold: its `max_held`; a broker subscription's is
    /// its `max_in_flight` (the workers here) and a receive batch of ten per receiver.
    pub fn capacity(&self) -> usize {
        if self.broker {
            self.workers + 10 * self.receivers
        } else {
            self.max_held
        }
    }

    /// How the consumer's settlements are retried.
    pub fn backoff(&self, workload: &Workload) -> Backoff {
        if self.broker {
            Backoff::default()
        } else {
            workload.backoff
        }
    }
}

/// What one handler call does: works for a while, then ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Behaviour {
    pub work: Duration,
    pub end: End,
}

/// How a handler call ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Ack,
    Drop,
    Retry,
    RetryAfter(Duration),
    /// Returns an `Err`: settled by the engine's error policy (a retry after its backoff).
    Fail,
    Panic,
}

impl Workload {
    /// The run of `seed`.
    pub fn draw(seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let fifo = rng.u8(..10) < 3;
        let suffix = if fifo { ".fifo" } else { "" };
        let queue = format!("orders{suffix}");
        let redrive = (rng.u8(..10) < 4).then(|| (format!("orders-dead{suffix}"), rng.u32(1..=4)));
        let groups = rng.usize(1..=4);
        let messages = (0..rng.usize(1..=24))
            .map(|n| Planned {
                body: format!("message-{n:03}"),
                group: fifo.then(|| format!("group-{}", rng.usize(..groups))),
                send_at: if rng.bool() {
                    Duration::ZERO
                } else {
                    Duration::from_millis(rng.u64(..60_000))
                },
            })
            .collect();
        let consumers = (0..rng.usize(1..=2))
            .map(|_| {
                let receive_batch = rng.usize(1..=10);
                let workers = rng.usize(1..=6);
                let prefetch = rng.usize(0..=12).max(receive_batch.saturating_sub(workers));
                // Small, so that the bound is reached: from one receive batch to a little
                // more than the workers and the prefetch.
                let max_held = rng.usize(receive_batch..=workers + prefetch + 12);
                let shutdown_at = match rng.u8(..20) {
                    // Now and then a long run, past the twelve-hour window.
                    0 => Duration::from_secs(rng.u64(12 * 3600..13 * 3600)),
                    1 => Duration::ZERO,
                    _ => Duration::from_millis(rng.u64(..240_000)),
                };
                ConsumerPlan {
                    receivers: rng.usize(1..=3),
                    workers,
                    prefetch,
                    max_held,
                    receive_batch,
                    wait_time: Duration::from_secs(rng.u64(1..=20)),
                    visibility: rng.u32(2..=30),
                    heartbeat: rng.u8(..10) < 8,
                    max_batch_wait: Duration::from_millis(rng.u64(..=50)),
                    shutdown_at,
                    shutdown_timeout: Duration::from_millis(rng.u64(..=30_000)),
                    // Drawn either way, so that the rest of the run is drawn alike; without the
                    // feature there is no broker to run it through.
                    broker: rng.u8(..4) == 0 && cfg!(feature = "ruststream"),
                }
            })
            .collect();
        let fault_rate = match rng.u8(..4) {
            0 => 0.0,
            1 => 0.02,
            2 => 0.1,
            _ => 0.3,
        };
        Self {
            seed,
            fifo,
            queue,
            redrive,
            messages,
            consumers,
            fault_rate,
            call_timeout: Duration::from_secs(rng.u64(1..=10)),
            backoff: Backoff::new(
                Duration::from_millis(rng.u64(10..=100)),
                Duration::from_secs(rng.u64(1..=5)),
                rng.u32(3..=8),
            ),
        }
    }

    /// What the handler call of `body` at its `receive_count`-th receive does, by a consumer
    /// whose receives hide a message for `visibility` seconds: the same whichever consumer
    /// makes it and whenever.
    pub fn behaviour(&self, body: &str, receive_count: u32, visibility: u32) -> Behaviour {
        let mut rng = fastrand::Rng::with_seed(mix(self.seed, body, receive_count));
        let visibility = Duration::from_secs(u64::from(visibility));
        let work = match rng.u8(..10) {
            0..=3 => Duration::ZERO,
            4..=8 => Duration::from_millis(rng.u64(..3_000)),
            // Outlives several visibility timeouts.
            _ => visibility * rng.u32(2..=4) + Duration::from_millis(rng.u64(..1_000)),
        };
        let end = match rng.u8(..100) {
            0..=39 => End::Ack,
            40..=47 => End::Drop,
            48..=59 => End::Retry,
            60..=79 => End::RetryAfter(retry_delay(&mut rng)),
            80..=87 => End::Fail,
            88..=93 => End::Panic,
            _ => End::Ack,
        };
        Behaviour { work, end }
    }
}

/// A `retry_after` delay: none, under a second, a few seconds with a fraction, minutes, past
/// twelve hours, or `Duration::MAX`.
fn retry_delay(rng: &mut fastrand::Rng) -> Duration {
    match rng.u8(..12) {
        0 => Duration::ZERO,
        1 | 2 => Duration::from_millis(rng.u64(1..1_000)),
        3..=6 => Duration::from_millis(rng.u64(1_000..20_000)),
        7 | 8 => Duration::from_secs(rng.u64(20..900)),
        9 => MAX_VISIBILITY + Duration::from_secs(rng.u64(..3_600)),
        10 => Duration::from_secs(rng.u64(3_600..12 * 3_600)),
        _ => Duration::MAX,
    }
}

/// A seed for one handler call, from the run's seed, the message and its receive count.
fn mix(seed: u64, body: &str, receive_count: u32) -> u64 {
    // FNV-1a over the parts: stable from one build and platform to the next.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = seed
        .to_le_bytes()
        .into_iter()
        .chain(body.bytes())
        .chain(receive_count.to_le_bytes());
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
