//! [`sleep_until_or_forever`]: a deadline that may not be set.

use tokio::time::Instant;

/// Sleeps until `deadline`, or forever when there is none: a `select!` branch for a task's
/// next timer, which wakes it only when one is due.
pub(crate) async fn sleep_until_or_forever(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
