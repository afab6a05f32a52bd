//! Progress bars on stderr, one style for every subcommand: drawn on a terminal, hidden when
//! stderr is a file or a pipe (CI logs stay clean). Progress is logged too, at a pace every
//! subcommand shares.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// How often a bar is redrawn from the counters it follows.
pub(crate) const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// How often progress is logged (at `info`).
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(5);

/// A bar of `total` messages, labelled `prefix`.
pub(crate) fn bar(total: u64, prefix: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {per_sec} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(prefix.to_owned());
    bar
}
