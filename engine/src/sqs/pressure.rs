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

    /// How many calls failed so, so far: news to a reader that saw fewer.
    pub(crate) fn marks(&self) -> u64 {
        self.marks.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_is_counted() {
        let pressure = Pressure::default();
        assert_eq!(pressure.marks(), 0, "nothing failed");
        pressure.mark();
        pressure.mark();
        assert_eq!(pressure.marks(), 2);
    }
}
