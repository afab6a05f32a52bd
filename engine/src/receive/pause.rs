//! Pausing an engine's receiving at run time, and resuming it.

use std::sync::Arc;

use tokio::sync::watch;
use tracing::info;

/// Pauses and resumes an engine's receiving while it runs, from any task: taken with
/// [`Engine::pause_handle`](crate::Engine::pause_handle) before [`run`](crate::Engine::run).
///
/// While paused, no receive starts, and a long poll under way is cut short: what it still
/// brings goes back to the queue at once (visibility 0), unhandled. Everything else goes on:
/// the messages already received are handed out, running handlers finish and settle, the
/// heartbeat keeps the messages held invisible, and shutdown works as usual. Clones control
/// the same engine.
#[derive(Debug, Clone)]
pub struct PauseHandle {
    queue: Arc<str>,
    paused: Arc<watch::Sender<bool>>,
}

impl PauseHandle {
    /// A handle for the engine of `queue`, receiving.
    pub(crate) fn new(queue: &str) -> Self {
        Self {
            queue: Arc::from(queue),
            paused: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Stops starting receives, until [`resume`](Self::resume). Pausing a paused engine
    /// changes nothing.
    pub fn pause(&self) {
        if !self.paused.send_replace(true) {
            info!(queue = %self.queue, "receiving paused");
        }
    }

    /// Starts receiving again. Resuming an engine that is receiving changes nothing.
    pub fn resume(&self) {
        if self.paused.send_replace(false) {
            info!(queue = %self.queue, "receiving resumed");
        }
    }

    /// Whether receiving is paused.
    pub fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// What the receivers watch.
    pub(crate) fn watch(&self) -> Paused {
        Paused(self.paused.subscribe())
    }
}

/// The receivers' view of a [`PauseHandle`].
#[derive(Debug, Clone)]
pub(crate) struct Paused(watch::Receiver<bool>);

impl Default for Paused {
    /// Never paused: for queues opened without an engine's handle (the broker's).
    fn default() -> Self {
        Self(watch::Sender::new(false).subscribe())
    }
}

impl Paused {
    /// Returns once receiving is not paused: at once when it is not.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches.
    pub(crate) async fn until_resumed(&mut self) {
        if *self.0.borrow_and_update() {
            // An error means every handle is gone, and with them any way to stay paused.
            let _ = self.0.wait_for(|paused| !*paused).await;
        }
    }

    /// Returns once receiving is paused: never, when every handle is gone.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches.
    pub(crate) async fn until_paused(&mut self) {
        if self.0.wait_for(|paused| *paused).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn receivers_wait_while_paused_and_go_on_when_resumed() {
        // A paused clock: the waits below take no real time.
        let handle = PauseHandle::new("q");
        let mut paused = handle.watch();
        paused.until_resumed().await;
        handle.pause();
        assert!(handle.is_paused());
        let waiting = tokio::time::timeout(Duration::from_secs(60), paused.until_resumed()).await;
        assert!(waiting.is_err(), "a paused receiver waits");
        let resume = handle.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            resume.resume();
        });
        tokio::time::timeout(Duration::from_secs(10), paused.until_resumed())
            .await
            .expect("resumed within 10 s");
        assert!(!handle.is_paused());
    }

    #[tokio::test]
    async fn a_receiver_whose_handles_are_all_gone_does_not_wait() {
        let handle = PauseHandle::new("q");
        let mut paused = handle.watch();
        handle.pause();
        drop(handle);
        tokio::time::timeout(Duration::from_secs(1), paused.until_resumed())
            .await
            .expect("no one can resume it: it goes on");
    }

    #[tokio::test]
    async fn the_default_is_never_paused() {
        Paused::default().until_resumed().await;
    }
}
