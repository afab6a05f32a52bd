//! Wiring a queue to a topic (feature `sns`): [`ConnectedSqsBroker::subscribe_queue_to_topic`].

use super::connection::ConnectedSqsBroker;
use super::error::SqsError;
use super::queue::queue_name;
use super::queue_policy::with_topic_grant;
use super::topic::{topic_arn, topic_name};
use crate::api::CallError;
use crate::metrics::CallCounts;
use crate::queue_url::is_url;
use crate::sqs::retry::retrying;

impl ConnectedSqsBroker {
    /// Subscribes the queue `queue` to the topic `topic`, with raw message delivery: the
    /// queue's consumers receive the body and headers as they were published, as if the
    /// message had been sent to the queue itself.
    ///
    /// The topic is created when missing (`CreateTopic` finds an existing one; a `.fifo` name
    /// is a FIFO topic), the queue must exist. SNS delivers to a queue only when the queue's
    /// access policy allows it, so the call first adds a statement allowing the topic (and
    /// only that topic, through `aws:SourceArn`) to the queue's policy, keeping every statement
    /// already there, and writes nothing when one already allows it. Then it subscribes, which
    /// SNS answers with the existing subscription when there is one: the call is safe on every
    /// start. Publishes through [`SnsPublish`](super::SnsPublish) to the topic reach the queue.
    ///
    /// ```no_run
    /// use std::io;
    ///
    /// use sqs_engine::prelude::*;
    ///
    /// /// A startup hook, on a clone of the app's broker: it connects through the app's
    /// /// connection.
    /// async fn wire(broker: SqsBroker) -> io::Result<()> {
    ///     let connected = broker.connect().await.map_err(io::Error::other)?;
    ///     for queue in ["billing", "shipping"] {
    ///         connected
    ///             .subscribe_queue_to_topic("order-events", queue)
    ///             .await
    ///             .map_err(io::Error::other)?;
    ///     }
    ///     Ok(())
    /// }
    /// ```
    ///
    /// The caller needs `sns:CreateTopic` and `sns:Subscribe` on the topic, and
    /// `sqs:GetQueueUrl`, `sqs:GetQueueAttributes` and `sqs:SetQueueAttributes` on the queue.
    /// Two processes granting different topics on one queue at the same moment may lose one of
    /// the statements (SQS has no conditional write); within one connection the grants take
    /// turns.
    ///
    /// # Errors
    ///
    /// [`SqsError::Admin`] when the topic cannot be created or the subscription is refused
    /// (a FIFO queue on a standard topic); [`SqsError::QueuePolicy`] when the queue is missing
    /// or its policy cannot be read, merged or written; [`SqsError::NotConnected`] after
    /// shutdown.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped between its calls, the queue may be left with the grant and no
    /// subscription. Calling it again completes it.
    pub async fn subscribe_queue_to_topic(&self, topic: &str, queue: &str) -> Result<(), SqsError> {
        if self.core().is_closed() {
            return Err(SqsError::NotConnected);
        }
        let publishing = self.core().publisher().publishing();
        let services = publishing.services();
        let backoff = publishing.backoff();
        let topic = topic_name(topic).into_owned();
        let topic_failed = |source: CallError| SqsError::Admin {
            name: topic.clone(),
            source: Box::new(source),
        };
        let policy_failed =
            |source: Box<dyn std::error::Error + Send + Sync>| SqsError::QueuePolicy {
                topic: topic.clone(),
                queue: queue.to_owned(),
                source,
            };
        let arn = topic_arn(services, backoff, &topic)
            .await
            .map_err(topic_failed)?;
        let target = queue_name(queue);
        let url = if is_url(&target) {
            target.clone().into_owned()
        } else {
            retrying(&backoff, || services.sqs.queue_url(&target))
                .await
                .map_err(|e| policy_failed(Box::new(e)))?
        };
        let queue_arn = {
            // Read, merged and written back under the lock: two grants through this
            // connection do not drop each other's statement.
            let _writing = self.core().policy_writes.lock().await;
            let attributes = retrying(&backoff, || services.sqs.queue_attributes(&url))
                .await
                .map_err(|e| policy_failed(Box::new(e)))?;
            let Some(queue_arn) = attributes.arn else {
                return Err(policy_failed("SQS gave no ARN for the queue".into()));
            };
            let merged = with_topic_grant(attributes.policy.as_deref(), &queue_arn, &arn)
                .map_err(|reason| policy_failed(reason.into()))?;
            if let Some(policy) = merged {
                let write = [("Policy", policy)];
                retrying(&backoff, || services.sqs.set_queue_attributes(&url, &write))
                    .await
                    .map_err(|e| policy_failed(Box::new(e)))?;
            }
            queue_arn
        };
        let sns = services.sns().map_err(&topic_failed)?;
        let subscribed = retrying(&backoff, || sns.subscribe_queue(&arn, &queue_arn)).await;
        CallCounts::single(&topic, "Subscribe", subscribed.is_ok());
        subscribed.map_err(topic_failed)?;
        self.core().note_topic_queue(&topic, queue);
        Ok(())
    }
}
