//! Deliberate defects, switched on for a simulation to prove that its invariants catch them.

/// A bug put into the engine on purpose, for a simulation to prove that its invariants catch
/// it. Only builds with the `testing` feature have the switch ([`inject_defect`]); elsewhere
/// the engine's checks of it are constant `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Defect {
    /// A settled delivery stays in the heartbeat's schedule: its visibility is extended after
    /// its settlement.
    HeartbeatKeptAfterSettle,
    /// A `retry_after` delay is sent in whole seconds rounded down instead of up.
    RetryAfterRoundedDown,
    /// A FIFO group's next message received in the same batch starts without waiting for the
    /// turn of the one before it.
    FifoNextStartedEarly,
    /// The heartbeat gives a message up after one extension's call has failed, though its
    /// deadline is still ahead.
    HeartbeatGivesUpOnFailure,
    /// The FIFO gate waits for the messages it returned at their last allowed receive (which
    /// SQS moves to the dead-letter queue) and returns later messages of their group that
    /// arrive meanwhile, whatever their receive count: the group drains into the dead-letter
    /// queue unseen.
    FifoWaitsForTheDeadLettered,
}

thread_local! {
    static DEFECT: std::cell::Cell<Option<Defect>> = const { std::cell::Cell::new(None) };
}

/// Switches `defect` on (or, with `None`, every defect off) for engines running on this thread,
/// until the returned guard drops. A simulation on a current-thread runtime runs the whole
/// engine on the thread that switched it on; other threads are not affected.
#[must_use = "the defect is switched off again when the guard drops"]
pub fn inject_defect(defect: Option<Defect>) -> DefectGuard {
    let before = DEFECT.with(|cell| cell.replace(defect));
    DefectGuard { before }
}

/// Switches the defect of [`inject_defect`] off again (back to what was on before) when
/// dropped.
#[derive(Debug)]
pub struct DefectGuard {
    before: Option<Defect>,
}

impl Drop for DefectGuard {
    fn drop(&mut self) {
        DEFECT.with(|cell| cell.set(self.before));
    }
}

/// Whether `defect` is switched on for this thread.
pub(crate) fn defect_on(defect: Defect) -> bool {
    DEFECT.with(|cell| cell.get() == Some(defect))
}
