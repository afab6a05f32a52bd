//! What a load-test handler does with each message: how long it works, and which outcome it
//! returns, decided deterministically from the message so that reruns (and the systems of a
//! comparison) see the same mix.
//!
//! A message's share decisions come from a hash of the part of its body that names it: the
//! bodies `fill` writes start with the message's index and its send time
//! (`loadtest message 17 1764500000123456 xxx`), and the key is `loadtest message 17` (see
//! [`parse_body`]), so the same messages of a rerun get the same decisions, while message ids
//! and send times change with every fill. Each decision (retry_after, drop, slow) uses its
//! own salt, so the shares are independent of each other.

use std::time::Duration;

use crate::number_arg::parse_number_in;

/// What the handler does, as configured.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Behaviour {
    /// Simulated I/O every message awaits before its outcome.
    pub(crate) delay: Duration,
    /// Share (0..=1) of first deliveries answered with retry_after; their redelivery is acked.
    pub(crate) retry_after_share: f64,
    /// The delay of a retry_after.
    pub(crate) retry_after: Duration,
    /// Share (0..=1) of messages dropped.
    pub(crate) drop_share: f64,
    /// Share (0..=1) of messages that also await [`slow`](Self::slow).
    pub(crate) slow_share: f64,
    /// The extra wait of a slow message.
    pub(crate) slow: Duration,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            retry_after_share: 0.0,
            retry_after: Duration::from_secs(1),
            drop_share: 0.0,
            slow_share: 0.0,
            slow: Duration::ZERO,
        }
    }
}

/// The outcome a handler returns, independent of any one system's outcome type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Processed: delete it.
    Ack,
    /// Give up on it: delete it (or hand it to the dead-letter queue).
    Drop,
    /// Hand it out again after this delay.
    RetryAfter(Duration),
}

impl Verdict {
    /// Whether the message is finished with this outcome (it will not come back).
    pub(crate) fn is_final(self) -> bool {
        matches!(self, Self::Ack | Self::Drop)
    }
}

/// What to do with one delivery: wait this long, then answer this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decision {
    /// The simulated work, slow share included.
    pub(crate) wait: Duration,
    /// The outcome.
    pub(crate) verdict: Verdict,
}

/// Salt of the retry_after decision.
const RETRY_AFTER_SALT: u64 = 0x5265_7472_7941_6674;
/// Salt of the drop decision.
const DROP_SALT: u64 = 0x4472_6f70_0000_0001;
/// Salt of the slow decision.
const SLOW_SALT: u64 = 0x536c_6f77_0000_0002;

impl Behaviour {
    /// The decision for a delivery of the message with `key` (see [`parse_body`]), received for the
    /// `receive_count`th time (1 for the first delivery).
    ///
    /// A message in the retry_after share is retried on its first delivery and judged on
    /// the others as any other; a message in the drop share is dropped; the rest are acked.
    pub(crate) fn decide(&self, key: &str, receive_count: u32) -> Decision {
        let mut wait = self.delay;
        if self.slow_share > 0.0 && in_share(key, SLOW_SALT, self.slow_share) {
            wait += self.slow;
        }
        let verdict = if receive_count <= 1
            && self.retry_after_share > 0.0
            && in_share(key, RETRY_AFTER_SALT, self.retry_after_share)
        {
            Verdict::RetryAfter(self.retry_after)
        } else if self.drop_share > 0.0 && in_share(key, DROP_SALT, self.drop_share) {
            Verdict::Drop
        } else {
            Verdict::Ack
        };
        Decision { wait, verdict }
    }
}

/// Whether `key` falls in the first `share` (0..=1) of the hash space salted with `salt`.
pub(crate) fn in_share(key: &str, salt: u64, share: f64) -> bool {
    if share >= 1.0 {
        return true;
    }
    // The top 53 bits, as a fraction in [0, 1).
    let fraction = (hash(key, salt) >> 11) as f64 / (1u64 << 53) as f64;
    fraction < share
}

/// FNV-1a over `key`, seeded with `salt`, then mixed (splitmix64's finaliser) so that keys
/// differing only at the end spread over the whole range.
fn hash(key: &str, salt: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325_u64 ^ salt;
    for byte in key.bytes() {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The decision key and send time (microseconds since the Unix epoch) of a body written by
/// `fill` (`loadtest message 17 1764500000123456 xxx`): the key is the part naming the
/// message (`loadtest message 17`), the same in every fill; a body of another shape is its
/// own key, with no send time.
pub(crate) fn parse_body(body: &str) -> (&str, Option<u64>) {
    let mut spaces = body.match_indices(' ').map(|(at, _)| at);
    let (Some(_), Some(_), Some(key_end)) = (spaces.next(), spaces.next(), spaces.next()) else {
        return (body, None);
    };
    let rest = &body[key_end + 1..];
    let sent = rest
        .split(' ')
        .next()
        .and_then(|micros| micros.parse().ok());
    (&body[..key_end], sent)
}

/// The FIFO group and the number in that group of a body written by a FIFO fill
/// (`loadtest message 17 1764500000123456 7/0 xxx`, see [`crate::fill::fifo_body`]); `None`
/// for any other body.
pub(crate) fn parse_group_seq(body: &str) -> Option<(u64, u64)> {
    let (group, seq) = body.split(' ').nth(4)?.split_once('/')?;
    Some((group.parse().ok()?, seq.parse().ok()?))
}

/// Parses a share: a number in 0..=1.
///
/// # Errors
///
/// When the text is not a number, or out of range.
pub(crate) fn parse_share(text: &str) -> Result<f64, String> {
    parse_number_in(text, |share| (0.0..=1.0).contains(&share), "in 0..=1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(index: u64) -> String {
        format!("loadtest message {index} xxxxxxxx")
    }

    fn share_of(count: u64, test: impl Fn(&str) -> bool) -> f64 {
        (0..count).filter(|i| test(&body(*i))).count() as f64 / count as f64
    }

    #[test]
    fn a_share_picks_about_that_fraction_of_messages() {
        for share in [0.01, 0.1, 0.5, 0.9] {
            let measured = share_of(20_000, |key| in_share(key, DROP_SALT, share));
            assert!((measured - share).abs() < 0.01, "{share}: {measured}");
        }
        assert!((share_of(1000, |key| in_share(key, DROP_SALT, 0.0))).abs() < f64::EPSILON);
        assert!((share_of(1000, |key| in_share(key, DROP_SALT, 1.0)) - 1.0).abs() < f64::EPSILON);
    }

    #[test]
    fn the_decision_for_a_message_is_the_same_every_time() {
        let behaviour = Behaviour {
            retry_after_share: 0.3,
            drop_share: 0.3,
            slow_share: 0.3,
            slow: Duration::from_millis(7),
            ..Behaviour::default()
        };
        for i in 0..100 {
            assert_eq!(behaviour.decide(&body(i), 1), behaviour.decide(&body(i), 1));
        }
    }

    #[test]
    fn a_retried_message_is_not_retried_again() {
        let behaviour = Behaviour {
            retry_after_share: 1.0,
            retry_after: Duration::from_secs(2),
            ..Behaviour::default()
        };
        assert_eq!(
            behaviour.decide("m", 1).verdict,
            Verdict::RetryAfter(Duration::from_secs(2))
        );
        assert_eq!(behaviour.decide("m", 2).verdict, Verdict::Ack);
    }

    #[test]
    fn the_shares_are_independent() {
        let behaviour = Behaviour {
            drop_share: 0.5,
            slow_share: 0.5,
            slow: Duration::from_millis(1),
            ..Behaviour::default()
        };
        let both = share_of(20_000, |key| {
            let decision = behaviour.decide(key, 1);
            decision.verdict == Verdict::Drop && !decision.wait.is_zero()
        });
        assert!((both - 0.25).abs() < 0.015, "{both}");
    }

    #[test]
    fn a_body_gives_its_key_and_send_time() {
        assert_eq!(
            parse_body("loadtest message 17 1764500000123456 xxxx"),
            ("loadtest message 17", Some(1_764_500_000_123_456))
        );
        assert_eq!(
            parse_body("loadtest message 17"),
            ("loadtest message 17", None)
        );
        assert_eq!(parse_body("hello"), ("hello", None));
        assert_eq!(
            parse_group_seq("loadtest message 17 1764500000123456 7/3 xxxx"),
            Some((7, 3))
        );
        assert_eq!(
            parse_group_seq("loadtest message 17 1764500000123456 xxxx"),
            None
        );
    }

    #[test]
    fn shares_out_of_range_are_refused() {
        assert_eq!(parse_share("0.25"), Ok(0.25));
        assert!(parse_share("1.5").is_err());
        assert!(parse_share("-0.1").is_err());
        assert!(parse_share("x").is_err());
    }
}
