//! Per-call latency: how long the embedded server holds each call, so that a load test can
//! run at the round trips a real SQS has rather than at loopback's fraction of a
//! millisecond.
//!
//! Every call draws one latency. Half of it is spent before the action is applied (the
//! request on its way in), the rest after its answer is ready (the answer on its way out):
//! a long poll still waits for messages as it does without latency, with the latency added
//! on top. The waits are tokio timers on the server's thread, so other calls proceed while
//! one waits. Tokio's timer fires on whole milliseconds, after the deadline: the deadline is
//! set half a millisecond early, and a call's wait then ends within about a millisecond of its
//! drawn latency.
//!
//! The draws come from a seeded generator, reseeded whenever the latency is set: the same
//! seed gives the same sequence of latencies, in the order the calls arrive.
//!
//! ## The SQS-like distribution ([`Latency::SQS`])
//!
//! A log-normal with a median of 10 ms and a 99th percentile of 50 ms (mean 12.7 ms), cut
//! at 1 s. Published SQS latency figures are few, and none gives a distribution, so the
//! shape is an assumption, informed by:
//!
//! - Amazon's own measurement of 2012 (quoted in the revised "Cloud Performance Benchmark
//!   Series: Amazon SQS", Stony Brook University, July 2012): 16 ms to send a 1 KB message
//!   from EC2 in the same region (us-east-1);
//! - reports of a tail far above the median: a 99th percentile several times the median,
//!   in part from connections re-established every so many requests (H. Fernandes, "SQS's
//!   Slow Tail Latency" and "SQS Performance (II)", hfernandes.com).
//!
//! Service latencies are commonly modelled as log-normal (positive, skewed, with a long right
//! tail); the median and p99 chosen put most calls in the several-to-tens of milliseconds
//! the sources above describe. Other shapes are one `--latency` away.

use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;

/// The z-score of the 99th percentile of a standard normal distribution.
const Z_P99: f64 = 2.326_347_874;

/// The longest latency a log-normal draw gives; longer draws are cut to it.
const MAX_DRAW_MS: f64 = 1000.0;

/// The seed of the draws when none is given.
pub const DEFAULT_SEED: u64 = 1;

/// The latency the embedded server adds to every call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Latency {
    /// None: the server answers as fast as it can (loopback).
    #[default]
    None,
    /// The same latency for every call, in milliseconds.
    Fixed {
        /// The latency of each call, in milliseconds.
        ms: f64,
    },
    /// A log-normal distribution with the given median and 99th percentile, in milliseconds.
    LogNormal {
        /// The median, in milliseconds.
        median_ms: f64,
        /// The 99th percentile, in milliseconds.
        p99_ms: f64,
    },
}

impl Latency {
    /// The SQS-like distribution: log-normal, median 10 ms, p99 50 ms (see the module docs
    /// for where the figures come from).
    pub const SQS: Self = Self::LogNormal {
        median_ms: 10.0,
        p99_ms: 50.0,
    };

    /// Whether this adds no latency.
    pub fn is_none(&self) -> bool {
        match *self {
            Self::None => true,
            Self::Fixed { ms } => ms <= 0.0,
            Self::LogNormal { median_ms, .. } => median_ms <= 0.0,
        }
    }

    /// The mean latency added to a call, in milliseconds (a log-normal's mean is
    /// `median × e^(σ²/2)`; the cut at 1 s is ignored).
    pub fn mean_ms(&self) -> f64 {
        match *self {
            Self::None => 0.0,
            Self::Fixed { ms } => ms.max(0.0),
            Self::LogNormal { median_ms, p99_ms } => {
                let sigma = sigma(median_ms, p99_ms);
                median_ms.max(0.0) * (sigma * sigma / 2.0).exp()
            }
        }
    }

    /// A short label: `loopback`, `10 ms`, `sqs-like (p50 10 ms, p99 50 ms)`.
    pub fn label(&self) -> String {
        match *self {
            _ if self.is_none() => "loopback".to_owned(),
            Self::Fixed { ms } => format!("{} ms", trim(ms)),
            Self::LogNormal { median_ms, p99_ms } if *self == Self::SQS => {
                format!(
                    "sqs-like (p50 {} ms, p99 {} ms)",
                    trim(median_ms),
                    trim(p99_ms)
                )
            }
            Self::LogNormal { median_ms, p99_ms } => {
                format!(
                    "log-normal (p50 {} ms, p99 {} ms)",
                    trim(median_ms),
                    trim(p99_ms)
                )
            }
            Self::None => "loopback".to_owned(),
        }
    }

    /// A shorter label, for narrow columns and queue names: `loopback`, `10ms`, `sqs`,
    /// `ln10-50` (letters, digits, `-` and `_` only).
    pub fn short(&self) -> String {
        match *self {
            _ if self.is_none() => "loopback".to_owned(),
            Self::Fixed { ms } => format!("{}ms", trim(ms).replace('.', "_")),
            Self::LogNormal { .. } if *self == Self::SQS => "sqs".to_owned(),
            Self::LogNormal { median_ms, p99_ms } => format!(
                "ln{}-{}",
                trim(median_ms).replace('.', "_"),
                trim(p99_ms).replace('.', "_")
            ),
            Self::None => "loopback".to_owned(),
        }
    }

    /// One call's latency, drawn with `rng`.
    pub fn draw(&self, rng: &mut fastrand::Rng) -> Duration {
        let ms = match *self {
            _ if self.is_none() => 0.0,
            Self::None => 0.0,
            Self::Fixed { ms } => ms,
            Self::LogNormal { median_ms, p99_ms } => {
                let z = standard_normal(rng);
                (median_ms * (sigma(median_ms, p99_ms) * z).exp()).min(MAX_DRAW_MS)
            }
        };
        Duration::from_secs_f64(ms.max(0.0) / 1000.0)
    }
}

/// σ of the log-normal with this median and 99th percentile.
fn sigma(median_ms: f64, p99_ms: f64) -> f64 {
    if median_ms <= 0.0 || p99_ms <= median_ms {
        return 0.0;
    }
    (p99_ms / median_ms).ln() / Z_P99
}

/// A number of milliseconds without a needless `.0`.
fn trim(ms: f64) -> String {
    if (ms - ms.round()).abs() < 1e-9 {
        format!("{ms:.0}")
    } else {
        format!("{ms}")
    }
}

/// A draw of a standard normal variable (Box–Muller).
fn standard_normal(rng: &mut fastrand::Rng) -> f64 {
    // 1 - f64() is in (0, 1], so its logarithm is finite.
    let u1 = 1.0 - rng.f64();
    let u2 = rng.f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl FromStr for Latency {
    type Err = String;

    /// `none` (or `loopback`, `0`); `sqs` ([`Latency::SQS`]); a number of milliseconds
    /// (`10`, `10ms`) for a fixed latency; `lognormal:MEDIAN,P99` in milliseconds.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let number = |s: &str| {
            s.trim()
                .trim_end_matches("ms")
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
        };
        match text {
            "none" | "loopback" => return Ok(Self::None),
            "sqs" => return Ok(Self::SQS),
            _ => {}
        }
        if let Some(rest) = text.strip_prefix("lognormal:") {
            if let Some((median, p99)) = rest.split_once(',')
                && let (Some(median_ms), Some(p99_ms)) = (number(median), number(p99))
                && p99_ms >= median_ms
            {
                return Ok(Self::LogNormal { median_ms, p99_ms });
            }
            return Err(format!(
                "`{text}`: expected lognormal:MEDIAN,P99 in milliseconds, P99 >= MEDIAN"
            ));
        }
        match number(text) {
            Some(0.0) => Ok(Self::None),
            Some(ms) => Ok(Self::Fixed { ms }),
            None => Err(format!(
                "`{text}`: expected none, sqs, a number of milliseconds, or \
                 lognormal:MEDIAN,P99"
            )),
        }
    }
}

/// The server's current latency and the generator its draws come from.
#[derive(Debug)]
pub(crate) struct Delays(Mutex<(Latency, fastrand::Rng)>);

impl Delays {
    /// No latency.
    pub(crate) fn new() -> Self {
        Self(Mutex::new((
            Latency::None,
            fastrand::Rng::with_seed(DEFAULT_SEED),
        )))
    }

    /// Sets the latency, and reseeds the draws with `seed`.
    pub(crate) fn set(&self, latency: Latency, seed: u64) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) =
            (latency, fastrand::Rng::with_seed(seed));
    }

    /// The latency now.
    pub(crate) fn latency(&self) -> Latency {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).0
    }

    /// One call's latency.
    pub(crate) fn draw(&self) -> Duration {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (latency, rng) = &mut *state;
        if latency.is_none() {
            return Duration::ZERO;
        }
        latency.draw(rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_parse_from_the_command_line() {
        assert_eq!("none".parse(), Ok(Latency::None));
        assert_eq!("0".parse(), Ok(Latency::None));
        assert_eq!("sqs".parse(), Ok(Latency::SQS));
        assert_eq!("10".parse(), Ok(Latency::Fixed { ms: 10.0 }));
        assert_eq!("2.5ms".parse(), Ok(Latency::Fixed { ms: 2.5 }));
        assert_eq!(
            "lognormal:5,40".parse(),
            Ok(Latency::LogNormal {
                median_ms: 5.0,
                p99_ms: 40.0
            })
        );
        assert!("lognormal:40,5".parse::<Latency>().is_err());
        assert!("-3".parse::<Latency>().is_err());
        assert!("fast".parse::<Latency>().is_err());
    }

    #[test]
    fn the_sqs_like_draws_have_the_documented_median_and_p99() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut draws: Vec<f64> = (0..100_000)
            .map(|_| Latency::SQS.draw(&mut rng).as_secs_f64() * 1000.0)
            .collect();
        draws.sort_by(f64::total_cmp);
        let median = draws[draws.len() / 2];
        let p99 = draws[draws.len() * 99 / 100];
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((median - 10.0).abs() < 0.3, "median {median}");
        assert!((p99 - 50.0).abs() < 3.0, "p99 {p99}");
        assert!((mean - Latency::SQS.mean_ms()).abs() < 0.3, "mean {mean}");
        assert!(draws.iter().all(|ms| *ms <= MAX_DRAW_MS));
    }

    #[test]
    fn the_same_seed_draws_the_same_latencies() {
        let delays = Delays::new();
        delays.set(Latency::SQS, 3);
        let first: Vec<Duration> = (0..10).map(|_| delays.draw()).collect();
        delays.set(Latency::SQS, 3);
        let again: Vec<Duration> = (0..10).map(|_| delays.draw()).collect();
        assert_eq!(first, again);
        delays.set(Latency::Fixed { ms: 4.0 }, 3);
        assert_eq!(delays.draw(), Duration::from_millis(4));
        delays.set(Latency::None, 3);
        assert_eq!(delays.draw(), Duration::ZERO);
    }
}
