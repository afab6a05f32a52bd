//! [`LogCapture`]: what a test binary's tracing subscriber writes, kept in memory for the
//! test to read.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tracing_subscriber::fmt::MakeWriter;
pub use tracing_subscriber::fmt::format::FmtSpan;

/// Everything the process-wide subscriber writes, as plain text (no ANSI colours).
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// The capture of this test binary. The first call installs the process-wide subscriber,
    /// keeping events at `level` and above (`log` records too) and writing the span events
    /// `spans` names; later calls return the same capture, whatever they ask for, so a test
    /// binary asks the same everywhere.
    ///
    /// # Panics
    ///
    /// On the first call, when another global subscriber is already installed.
    pub fn install(level: tracing::Level, spans: FmtSpan) -> &'static LogCapture {
        static CAPTURE: OnceLock<LogCapture> = OnceLock::new();
        CAPTURE.get_or_init(|| {
            let capture = LogCapture::default();
            tracing_subscriber::fmt()
                .with_max_level(level)
                .with_span_events(spans)
                .with_ansi(false)
                .with_writer(capture.clone())
                .try_init()
                .expect("the only subscriber of this test binary");
            capture
        })
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogCapture {
    type Writer = LogCapture;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
