//! One opened queue: its URL and attributes, its metrics, its settlement state.

use std::future::Future;
use std::sync::Arc;

use tracing::warn;

use crate::api::{CallError, CallErrorKind, QueueAttributes, SqsApi};
use crate::backoff::Backoff;
use crate::error::Error;
use crate::metrics::{Action, QueueMetrics, StatsCells};
use crate::settle::Settler;
use crate::settle::coalescer::CoalescerConfig;

/// SQS's default visibility timeout, used when the queue does not say.
const DEFAULT_VISIBILITY_SECS: u32 = 30;

/// Everything the tasks of one queue share.
pub(crate) struct QueueRuntime {
    /// The queue's name, for logs and metric labels.
    pub(crate) name: Arc<str>,
    pub(crate) url: String,
    pub(crate) api: Arc<dyn SqsApi>,
    /// The visibility timeout each receive asks for, in seconds.
    pub(crate) visibility_timeout: u32,
    /// The redrive policy's `maxReceiveCount` when the engine declared one: a drop at this
    /// receive count returns the message instead of deleting it.
    pub(crate) max_receive_count: Option<u32>,
    pub(crate) backoff: Backoff,
    pub(crate) metrics: QueueMetrics,
    pub(crate) settler: Settler,
}

/// What opening a queue needs to know.
pub(crate) struct OpenOptions {
    pub(crate) queue: String,
    pub(crate) visibility_timeout: Option<u32>,
    pub(crate) backoff: Backoff,
    pub(crate) coalescer: CoalescerConfig,
}

/// Whether `queue` is a queue URL rather than a name.
pub(crate) fn is_url(queue: &str) -> bool {
    queue.starts_with("https://") || queue.starts_with("http://")
}

/// The queue name at the end of a queue URL.
pub(crate) fn name_of(queue: &str) -> &str {
    if is_url(queue) {
        queue
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(queue)
    } else {
        queue
    }
}

impl QueueRuntime {
    /// Resolves the queue and reads its attributes.
    ///
    /// # Errors
    ///
    /// [`Error::QueueNotFound`] when the queue does not exist; [`Error::Open`] when a call
    /// failed otherwise (after retries, when the failure was transient).
    pub(crate) async fn open(
        api: Arc<dyn SqsApi>,
        options: OpenOptions,
        stats: Arc<StatsCells>,
    ) -> Result<(Self, QueueAttributes), Error> {
        let name: Arc<str> = Arc::from(name_of(&options.queue));
        let metrics = QueueMetrics::new(&name, stats);
        let queue = &options.queue;
        let open_error = |action: Action, source: CallError| match source.kind {
            CallErrorKind::QueueNotFound => Error::QueueNotFound {
                queue: queue.clone(),
            },
            _ => Error::Open {
                queue: queue.clone(),
                action: action.as_str(),
                source,
            },
        };
        let url = if is_url(queue) {
            queue.clone()
        } else {
            retrying(&options.backoff, &metrics, Action::GetQueueUrl, || {
                api.queue_url(queue)
            })
            .await
            .map_err(|e| open_error(Action::GetQueueUrl, e))?
        };
        let attributes = retrying(
            &options.backoff,
            &metrics,
            Action::GetQueueAttributes,
            || api.queue_attributes(&url),
        )
        .await
        .map_err(|e| open_error(Action::GetQueueAttributes, e))?;
        let visibility_timeout = options
            .visibility_timeout
            .or(attributes.visibility_timeout)
            .unwrap_or(DEFAULT_VISIBILITY_SECS);
        let runtime = Self {
            name,
            url,
            api,
            visibility_timeout,
            max_receive_count: None,
            backoff: options.backoff,
            metrics,
            settler: Settler::new(options.coalescer),
        };
        Ok((runtime, attributes))
    }
}

#[cfg(test)]
impl QueueRuntime {
    pub(crate) fn metrics_stats(&self) -> crate::metrics::Stats {
        self.metrics.snapshot()
    }
}

/// Makes a call, again after transient failures, under the backoff's budget. Each call is
/// counted.
pub(crate) async fn retrying<'a, T, F, Fut>(
    backoff: &Backoff,
    metrics: &QueueMetrics,
    action: Action,
    mut call: F,
) -> Result<T, CallError>
where
    F: FnMut() -> Fut + 'a,
    Fut: Future<Output = Result<T, CallError>> + 'a,
{
    let mut attempt = 1;
    loop {
        let result = call().await;
        metrics.call(action, result.is_ok());
        match result {
            Err(error) if error.is_transient() && attempt < backoff.max_attempts() => {
                warn!(action = action.as_str(), attempt, error = %error, "call failed; retrying");
                tokio::time::sleep(backoff.jittered(attempt)).await;
                attempt += 1;
            }
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_named_by_name_or_url() {
        assert_eq!(name_of("orders"), "orders");
        assert_eq!(
            name_of("http://127.0.0.1:4566/000000000000/orders"),
            "orders"
        );
        assert_eq!(
            name_of("https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo/"),
            "orders.fifo"
        );
        assert!(!is_url("orders"));
    }
}
