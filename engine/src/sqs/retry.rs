//! [`retrying`]: one call made again after transient failures, under a backoff's budget.

use std::future::Future;

use crate::api::CallError;
use crate::sqs::backoff::Backoff;

/// Makes `call` until it succeeds, fails in a way retrying cannot mend, or has used the
/// attempts `backoff` allows, sleeping a jittered delay between attempts.
pub(crate) async fn retrying<'a, T, F, Fut>(backoff: &Backoff, call: F) -> Result<T, CallError>
where
    F: FnMut() -> Fut + 'a,
    Fut: Future<Output = Result<T, CallError>> + 'a,
{
    retrying_observed(backoff, call, |_, _, _| {}).await
}

/// [`retrying`], where `attempted` sees each attempt's result, its number (from 1), and whether
/// it is made again.
pub(crate) async fn retrying_observed<'a, T, F, Fut>(
    backoff: &Backoff,
    mut call: F,
    mut attempted: impl FnMut(&Result<T, CallError>, u32, bool),
) -> Result<T, CallError>
where
    F: FnMut() -> Fut + 'a,
    Fut: Future<Output = Result<T, CallError>> + 'a,
{
    let mut attempt = 1;
    loop {
        let result = call().await;
        let again = matches!(&result, Err(error) if error.is_transient())
            && attempt < backoff.max_attempts();
        attempted(&result, attempt, again);
        if !again {
            return result;
        }
        tokio::time::sleep(backoff.jittered(attempt)).await;
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::api::CallErrorKind;

    fn backoff() -> Backoff {
        Backoff::new(Duration::from_millis(10), Duration::from_millis(100), 3)
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_failure_is_retried_until_the_budget_is_spent() {
        let calls = AtomicU32::new(0);
        let mut seen = Vec::new();
        let result: Result<(), _> = retrying_observed(
            &backoff(),
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(CallError::new(CallErrorKind::Throttled, "slow down"))
            },
            |_, attempt, again| seen.push((attempt, again)),
        )
        .await;
        assert_eq!(
            result.expect_err("budget spent").kind,
            CallErrorKind::Throttled
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(seen, vec![(1, true), (2, true), (3, false)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_failure_or_a_success_ends_the_calls() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = retrying(&backoff(), || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(CallError::new(CallErrorKind::AccessDenied, "no"))
        })
        .await;
        assert_eq!(
            result.expect_err("permanent").kind,
            CallErrorKind::AccessDenied
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let calls = AtomicU32::new(0);
        let result = retrying(&backoff(), || async {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(CallError::new(CallErrorKind::Server, "5xx"))
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(result.expect("the second call succeeds"), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
