//! The engine's bounded settings, each a newtype whose range is stated once: the check and the
//! text an out-of-range value's [`ConfigError`] names both derive from it.

use std::time::Duration;

use crate::error::ConfigError;

/// Newtypes, one a setting (`Name(int): "setting" in [min..=max];`), each over `$int` and
/// holding only `$min..=$max`, made with `new`, which refuses any other value with a
/// [`ConfigError`] naming `$setting` and the range (`"1..=10"`). The bounds may be byte sizes
/// (`1 MiB..=1 TiB`, and the range reads so). The lower bound may be the value of another
/// bounded setting, named in words (`(one receive batch: ReceiveBatch)..=10`): `new` then takes
/// that setting too, and the range reads `"at least one receive batch, at most 10"`.
macro_rules! bounded {
    ($($(#[$doc:meta])* $name:ident($int:ty): $setting:literal in [$($range:tt)+];)+) => {
        $(bounded!($(#[$doc])* $name($int): $setting in $($range)+);)+
    };
    ($(#[$doc:meta])* $name:ident($int:ty): $setting:literal in $min:literal..=$max:literal) => {
        bounded!(@fixed $(#[$doc])* $name($int), $setting, $min, $max,
            concat!($min, "..=", $max));
    };
    ($(#[$doc:meta])* $name:ident($int:ty): $setting:literal
        in $min:literal $min_unit:ident..=$max:literal $max_unit:ident) => {
        bounded!(@fixed $(#[$doc])* $name($int), $setting,
            $min << unit_shift!($min_unit), $max << unit_shift!($max_unit),
            concat!($min, " ", stringify!($min_unit), "..=", $max, " ", stringify!($max_unit)));
    };
    ($(#[$doc:meta])* $name:ident($int:ty): $setting:literal
        in ($($words:ident)+ : $low:ident)..=$max:literal) => {
        bounded!(@ $(#[$doc])* $name($int), $setting, $low::MIN, $max,
            concat!("at least ", stringify!($($words)+), ", at most ", $max));

        impl $name {
            /// `value`, when it is in the range that starts at `low`.
            pub(crate) fn new(value: $int, low: $low) -> Result<Self, ConfigError> {
                Self::within(low.get(), value)
            }
        }
    };
    (@fixed $(#[$doc:meta])* $name:ident($int:ty), $setting:literal, $min:expr, $max:expr,
        $range:expr) => {
        bounded!(@ $(#[$doc])* $name($int), $setting, $min, $max, $range);

        #[allow(dead_code, reason = "each setting uses the part of the range it needs")]
        impl $name {
            /// `value`, when it is in the range.
            pub(crate) fn new(value: $int) -> Result<Self, ConfigError> {
                Self::within(Self::MIN, value)
            }

            /// Whether `value` is in the range.
            pub(crate) fn contains(value: $int) -> bool {
                (Self::MIN..=Self::MAX).contains(&value)
            }
        }
    };
    (@ $(#[$doc:meta])* $name:ident($int:ty), $setting:literal, $min:expr, $max:expr,
        $range:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) struct $name($int);

        #[allow(dead_code, reason = "each setting uses the part of the range it needs")]
        impl $name {
            /// The smallest value allowed.
            pub(crate) const MIN: $int = $min;
            /// The largest value allowed.
            pub(crate) const MAX: $int = $max;
            /// The range, as an error names it.
            pub(crate) const RANGE: &'static str = $range;

            /// `value`, when it is in `min..=MAX`.
            fn within(min: $int, value: $int) -> Result<Self, ConfigError> {
                if (min..=Self::MAX).contains(&value) {
                    Ok(Self(value))
                } else {
                    Err(ConfigError::new($setting, value, Self::RANGE))
                }
            }

            /// The value.
            pub(crate) fn get(self) -> $int {
                self.0
            }
        }
    };
}

/// The bits a byte count shifts by to count in `$unit`: `1 << unit_shift!(MiB)` bytes is
/// one MiB.
macro_rules! unit_shift {
    (KiB) => {
        10
    };
    (MiB) => {
        20
    };
    (GiB) => {
        30
    };
    (TiB) => {
        40
    };
}

bounded! {
    /// [`receivers`](crate::EngineBuilder::receivers): the most long-poll loops at once.
    Receivers(usize): "receivers" in [1..=256];

    /// [`workers`](crate::EngineBuilder::workers): handler invocations at once.
    Workers(usize): "workers" in [1..=100_000];

    /// [`Share::weight`](crate::Share::weight): a lane's share of a worker pool among the
    /// lanes of its priority.
    PoolWeight(u32): "Share::weight" in [1..=1000];

    /// [`receive_batch`](crate::EngineBuilder::receive_batch): messages asked for per receive,
    /// as many as SQS hands out in one.
    ReceiveBatch(usize): "receive_batch" in [1..=10];

    /// [`max_batches_in_flight`](crate::EngineBuilder::max_batches_in_flight): batch calls of
    /// one kind in flight at once.
    BatchesInFlight(usize): "max_batches_in_flight" in [1..=256];

    /// [`prefetch`](crate::EngineBuilder::prefetch): messages received ahead of a free worker.
    Prefetch(usize): "prefetch" in [0..=100_000];

    /// [`max_held`](crate::EngineBuilder::max_held): the most messages held at once, from one
    /// receive batch up.
    MaxHeld(usize): "max_held" in [(one receive batch: ReceiveBatch)..=1_000_000];

    /// [`max_held_bytes`](crate::EngineBuilder::max_held_bytes): the most bytes of messages
    /// (bodies and message attributes) held at once.
    MaxHeldBytes(usize): "max_held_bytes" in [1 MiB..=1 TiB];

    /// [`max_attempts`](crate::EngineBuilder::max_attempts): the receives after which SQS moves
    /// a message to the dead-letter queue, the redrive policy's `maxReceiveCount`, as SQS
    /// allows it.
    MaxReceiveCount(u32): "max_attempts" in [1..=1000];
}

/// A duration setting with a bound (`at most` or `at least` whole seconds), stated once: the
/// check and the text an out-of-range value's [`ConfigError`] names (`"at most 20 s"`) both
/// derive from it. The bound is the type's `MAX` or `MIN`.
macro_rules! bounded_duration {
    ($(#[$doc:meta])* $name:ident: $setting:literal, at most $secs:literal s) => {
        bounded_duration!(@ $(#[$doc])* $name, $setting, MAX, <=, "at most ", $secs);
    };
    ($(#[$doc:meta])* $name:ident: $setting:literal, at least $secs:literal s) => {
        bounded_duration!(@ $(#[$doc])* $name, $setting, MIN, >=, "at least ", $secs);
    };
    (@ $(#[$doc:meta])* $name:ident, $setting:literal, $bound:ident, $op:tt, $words:literal,
        $secs:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) struct $name(Duration);

        #[allow(dead_code, reason = "each setting uses the part of the bound it needs")]
        impl $name {
            /// The bound.
            pub(crate) const $bound: Duration = Duration::from_secs($secs);
            /// The bound, as an error names it.
            pub(crate) const EXPECTED: &'static str = concat!($words, $secs, " s");

            /// `value`, when it is within the bound.
            pub(crate) fn new(value: Duration) -> Result<Self, ConfigError> {
                if value $op Self::$bound {
                    Ok(Self(value))
                } else {
                    Err(ConfigError::duration($setting, value, Self::EXPECTED))
                }
            }

            /// The duration.
            pub(crate) fn get(self) -> Duration {
                self.0
            }
        }
    };
}

bounded_duration! {
    /// [`wait_time`](crate::EngineBuilder::wait_time): the long-poll wait, as SQS allows it.
    WaitTime: "wait_time", at most 20 s
}

// The bounds the macros take as literals, held to the limits SQS states once.
const _: () = assert!(ReceiveBatch::MAX == crate::limits::MAX_BATCH_ENTRIES);
const _: () = assert!(WaitTime::MAX.as_secs() == crate::limits::MAX_WAIT_SECS as u64);

bounded_duration! {
    /// [`max_batch_wait`](crate::EngineBuilder::max_batch_wait): how long a settlement may
    /// wait for company.
    MaxBatchWait: "max_batch_wait", at most 1 s
}

bounded_duration! {
    /// [`heartbeat_margin`](crate::EngineBuilder::heartbeat_margin): an extension must reach
    /// SQS before the deadline.
    HeartbeatMargin: "heartbeat_margin", at least 1 s
}

bounded_duration! {
    /// [`give_up_after`](crate::EngineBuilder::give_up_after): how long receives may fail for
    /// good before the engine gives up.
    GiveUpAfter: "give_up_after", at least 1 s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_in_the_range_is_kept_and_one_outside_is_refused_with_the_range() {
        assert_eq!(ReceiveBatch::new(10).map(ReceiveBatch::get), Ok(10));
        assert_eq!(ReceiveBatch::new(1).map(ReceiveBatch::get), Ok(1));
        assert_eq!(
            ReceiveBatch::new(11),
            Err(ConfigError::new("receive_batch", 11, "1..=10"))
        );
        assert_eq!(
            Workers::new(0).expect_err("refused").to_string(),
            "`workers` is 0, but must be 1..=100000"
        );
        assert!(!MaxReceiveCount::contains(1001));
        assert!(MaxReceiveCount::contains(1000));
    }

    #[test]
    fn a_range_in_bytes_reads_in_its_units() {
        assert_eq!(MaxHeldBytes::MIN, 1 << 20);
        assert_eq!(MaxHeldBytes::MAX, 1 << 40);
        assert_eq!(
            MaxHeldBytes::new((1 << 20) - 1),
            Err(ConfigError::new(
                "max_held_bytes",
                1_048_575,
                "1 MiB..=1 TiB"
            ))
        );
    }

    #[test]
    fn a_range_that_starts_at_another_setting_names_it() -> Result<(), ConfigError> {
        let batch = ReceiveBatch::new(10)?;
        assert_eq!(MaxHeld::new(10, batch).map(MaxHeld::get), Ok(10));
        assert_eq!(
            MaxHeld::new(9, batch).expect_err("refused").to_string(),
            "`max_held` is 9, but must be at least one receive batch, at most 1000000"
        );
        assert!(MaxHeld::new(1_000_001, ReceiveBatch::new(1)?).is_err());
        Ok(())
    }

    #[test]
    fn a_duration_past_its_bound_is_refused_with_the_bound() {
        assert_eq!(
            WaitTime::new(Duration::from_secs(20)).map(WaitTime::get),
            Ok(Duration::from_secs(20))
        );
        assert_eq!(
            WaitTime::new(Duration::from_millis(20_001))
                .expect_err("refused")
                .to_string(),
            "`wait_time` is 20.001s, but must be at most 20 s"
        );
        assert!(HeartbeatMargin::new(Duration::from_secs(1)).is_ok());
        assert_eq!(
            HeartbeatMargin::new(Duration::from_millis(999))
                .expect_err("refused")
                .to_string(),
            "`heartbeat_margin` is 999ms, but must be at least 1 s"
        );
    }
}
