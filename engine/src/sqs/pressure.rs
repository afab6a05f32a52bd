//! [`Pressure`]: the calls of one queue that failed in a way a retry may mend, counted where
//! the receivers and the settlement both see them.

use std::sync::atomic::{AtomicU64, Ordering};

/// How many calls to one queue (receives and settlement batch calls alike) failed in a way a
/// retry may mend: no answer in time, throttled, a server error. Each is a sign of an SQS that
/// is overloaded or throttling, whichever kind of call met it: receives and settlement calls
/// share the server. On news of one, the receivers are cut to one and measure their unloaded
/// round trip again with one receive in flight (see
/// [`LoadedRoundTrip::remeasure`](crate::sqs::round_trip::LoadedRoundTrip::remeasure)) before more
/// start.
#[derive(Debug, Default)]
pub(crate) struct Pressure {
    marks: AtomicU64,
}

impl Pressure {
    /// A call failed in a way a retry may mend.
    pub(crate) fn mark(&self) {
        self.marks.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a call failed so since `seen` was last brought up to date here. Asked after
    /// every receive: without news it only loads, and writes nothing.
    pub(crate) fn news(&self, seen: &AtomicU64) -> bool {
        let marks = self.marks.load(Ordering::Relaxed);
        marks > seen.load(Ordering::Relaxed) && seen.fetch_max(marks, Ordering::Relaxed) < marks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_is_news_once() {
        let pressure = Pressure::default();
        let seen = AtomicU64::new(0);
        assert!(!pressure.news(&seen), "nothing failed");
        pressure.mark();
        pressure.mark();
        assert!(pressure.news(&seen));
        assert!(!pressure.news(&seen), "already seen");
        pressure.mark();
        assert!(pressure.news(&seen));
    }
}
