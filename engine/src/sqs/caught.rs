//! A panic in a call to SQS, caught and turned into that call's failure.
//!
//! [`SqsApi`](crate::SqsApi) is a public trait: any implementation may panic. A batch call or a
//! receive that panics inside a spawned task would otherwise end the task with its bookkeeping
//! undone (a lane that never sees its call finish, waiting settlements never answered, a
//! shutdown that waits for them forever). The call sites wrap each call in [`caught`], so a
//! panic is a failed call like any other, with its message.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::task::Poll;

use crate::api::{CallError, CallErrorKind};

/// Runs `call`, turning a panic while it is polled into a [`CallError`] of kind
/// [`CallErrorKind::Other`] (not transient: a panic is a bug, not a passing fault).
pub(crate) async fn caught<T>(
    call: impl Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    let mut call = std::pin::pin!(call);
    std::future::poll_fn(move |cx| {
        // Unwind safety: after a panic the call's future is never polled again, and the state
        // it shared is the caller's own bookkeeping, which the error path restores.
        match catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(payload) => Poll::Ready(Err(CallError::new(
                CallErrorKind::Other,
                format!("the SQS client panicked: {}", panic_message(&*payload)),
            ))),
        }
    })
    .await
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_call_is_a_failed_call_with_its_message() {
        let result: Result<(), CallError> = caught(async { panic!("the client broke") }).await;
        let error = result.expect_err("a failure, not a panic");
        assert_eq!(error.kind, CallErrorKind::Other);
        assert!(!error.is_transient());
        assert!(error.message.contains("the client broke"), "{error}");
    }

    #[tokio::test]
    async fn an_answer_passes_through() {
        assert_eq!(caught(async { Ok::<_, CallError>(7) }).await.ok(), Some(7));
    }
}
