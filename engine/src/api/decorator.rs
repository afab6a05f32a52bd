//! [`SqsDecorator`]: an [`SqsApi`] that wraps another and changes only some of its calls.

use crate::api::{
    BoxFuture, CallError, EntryResult, QueueAttributes, ReceiveRequest, ReceivedMessage, SendEntry,
    SqsApi,
};

/// An [`SqsApi`] that wraps another, [`inner`](Self::inner), and overrides only the calls it
/// changes: every method it leaves out forwards to the inner API as it is.
///
/// Every `SqsDecorator` is an [`SqsApi`] (a blanket implementation), so it goes wherever one
/// is taken: [`EngineBuilder::api`](crate::EngineBuilder::api), the RustStream broker's `api`,
/// or inside another decorator. Use it to observe the calls the engine makes (record, count,
/// log), to shape them (delay, fail, rewrite an answer), or to route one call elsewhere. Do not
/// use it to retry: the engine retries transient failures itself, with backoff and jitter, and
/// counts them; a decorator that retries hides failures from those counts.
///
/// The methods carry the same names as [`SqsApi`]'s. Where both traits are in scope, call one
/// on a decorator by its trait (`SqsApi::receive(&decorator, &request)`); on
/// [`inner`](Self::inner) and on an `Arc<dyn SqsApi>` the plain call is unambiguous.
///
/// # Example
///
/// Deletes that take a second longer, everything else as SQS answers it:
///
/// ```no_run
/// use std::time::Duration;
///
/// use sqs_engine::{AwsSqs, BoxFuture, CallError, Engine, EntryResult, SqsApi, SqsDecorator};
///
/// struct SlowDeletes {
///     inner: AwsSqs,
/// }
///
/// impl SqsDecorator for SlowDeletes {
///     type Inner = AwsSqs;
///
///     fn inner(&self) -> &AwsSqs {
///         &self.inner
///     }
///
///     fn delete_message_batch<'a>(
///         &'a self,
///         queue_url: &'a str,
///         receipt_handles: &'a [&'a str],
///     ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
///         Box::pin(async move {
///             tokio::time::sleep(Duration::from_secs(1)).await;
///             self.inner.delete_message_batch(queue_url, receipt_handles).await
///         })
///     }
/// }
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let config = aws_config::load_from_env().await;
/// let api = SlowDeletes { inner: AwsSqs::from_sdk_config(&config) };
/// let engine = Engine::builder().api(api).queue("orders").build()?;
/// # drop(engine);
/// # Ok(())
/// # }
/// ```
pub trait SqsDecorator: Send + Sync + 'static {
    /// The API underneath: a concrete one, `dyn SqsApi`, or another decorator.
    type Inner: SqsApi + ?Sized;

    /// The API the calls this decorator leaves alone go to.
    fn inner(&self) -> &Self::Inner;

    /// [`SqsApi::queue_url`]; forwards unless overridden.
    fn queue_url<'a>(&'a self, queue_name: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        self.inner().queue_url(queue_name)
    }

    /// [`SqsApi::create_queue`]; forwards unless overridden.
    fn create_queue<'a>(
        &'a self,
        queue_name: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        self.inner().create_queue(queue_name, attributes)
    }

    /// [`SqsApi::queue_attributes`]; forwards unless overridden.
    fn queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
    ) -> BoxFuture<'a, Result<QueueAttributes, CallError>> {
        self.inner().queue_attributes(queue_url)
    }

    /// [`SqsApi::set_queue_attributes`]; forwards unless overridden.
    fn set_queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<(), CallError>> {
        self.inner().set_queue_attributes(queue_url, attributes)
    }

    /// [`SqsApi::receive`]; forwards unless overridden.
    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        self.inner().receive(request)
    }

    /// [`SqsApi::delete_message_batch`]; forwards unless overridden.
    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        self.inner()
            .delete_message_batch(queue_url, receipt_handles)
    }

    /// [`SqsApi::change_message_visibility_batch`]; forwards unless overridden.
    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        self.inner()
            .change_message_visibility_batch(queue_url, entries)
    }

    /// [`SqsApi::send_message_batch`]; forwards unless overridden.
    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        self.inner().send_message_batch(queue_url, entries)
    }
}

impl<D: SqsDecorator> SqsApi for D {
    fn queue_url<'a>(&'a self, queue_name: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        SqsDecorator::queue_url(self, queue_name)
    }

    fn create_queue<'a>(
        &'a self,
        queue_name: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        SqsDecorator::create_queue(self, queue_name, attributes)
    }

    fn queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
    ) -> BoxFuture<'a, Result<QueueAttributes, CallError>> {
        SqsDecorator::queue_attributes(self, queue_url)
    }

    fn set_queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<(), CallError>> {
        SqsDecorator::set_queue_attributes(self, queue_url, attributes)
    }

    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        SqsDecorator::receive(self, request)
    }

    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        SqsDecorator::delete_message_batch(self, queue_url, receipt_handles)
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        SqsDecorator::change_message_visibility_batch(self, queue_url, entries)
    }

    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        SqsDecorator::send_message_batch(self, queue_url, entries)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::CallErrorKind;
    use crate::stand_in::StandIn;

    /// Refuses every delete without asking the API underneath.
    struct NoDeletes(Arc<dyn SqsApi>);

    impl SqsDecorator for NoDeletes {
        type Inner = dyn SqsApi;

        fn inner(&self) -> &dyn SqsApi {
            &*self.0
        }

        fn delete_message_batch<'a>(
            &'a self,
            _queue_url: &'a str,
            _receipt_handles: &'a [&'a str],
        ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
            Box::pin(async { Err(CallError::new(CallErrorKind::AccessDenied, "no deletes")) })
        }
    }

    #[tokio::test]
    async fn a_decorator_changes_the_call_it_overrides_and_forwards_the_others() {
        let stand_in = StandIn::scripted(Vec::new());
        let api: Arc<dyn SqsApi> = Arc::new(NoDeletes(Arc::clone(&stand_in) as Arc<dyn SqsApi>));

        let url = api.queue_url("orders").await.expect("forwarded");
        assert_eq!(url, "http://sqs.stand-in/000000000000/orders");
        let deleted = api.delete_message_batch(&url, &["a"]).await;
        assert_eq!(
            deleted.expect_err("refused").kind,
            CallErrorKind::AccessDenied
        );
        let changed = api
            .change_message_visibility_batch(&url, &[("b", 30)])
            .await
            .expect("forwarded");
        assert_eq!(changed, vec![EntryResult::Ok]);
        let sent = api
            .send_message_batch(&url, &[SendEntry::default()])
            .await
            .expect("forwarded");
        assert_eq!(sent, vec![EntryResult::Ok]);

        assert_eq!(
            stand_in.calls(),
            vec![vec!["b=30".to_owned()], vec![String::new()]],
            "the delete never reached the API underneath"
        );
    }
}
