//! The SNS calls the broker's topic publishing makes, behind a trait (feature `sns`).
//!
//! [`SnsApi`] is to topics what [`SqsApi`](crate::SqsApi) is to queues: [`AwsSns`](crate::sqs::aws_sns::AwsSns) implements
//! it over `aws-sdk-sns`, and the in-process double ([`crate::testing`]) implements it over its
//! own queues, so a topic publish reaches the subscribed queues in a test on a paused clock.
//! A message is the same [`SendEntry`] a queue takes: body, message attributes, and on a FIFO
//! topic its group and deduplication id.

use crate::api::{BoxFuture, CallError, EntryResult, SendEntry};

/// The most entries SNS takes in one `PublishBatch`.
pub(crate) const MAX_PUBLISH_ENTRIES: usize = 10;

/// The largest message SNS takes, body and attributes together, and the largest
/// `PublishBatch`.
pub(crate) const MAX_TOPIC_MESSAGE_BYTES: usize = 256 * 1024;

/// The SNS calls of topic publishing and fan-out wiring.
///
/// Like [`SqsApi`](crate::SqsApi), an implementation does not retry on its own, and a batch
/// call answers with one [`EntryResult`] per request entry, in request order.
pub(crate) trait SnsApi: Send + Sync + 'static {
    /// Creates the topic of `name`, or finds the one of that name (`CreateTopic`, which is
    /// idempotent); returns its ARN. A `.fifo` name is a FIFO topic.
    fn create_topic<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<String, CallError>>;

    /// Publishes up to ten messages to one topic (`PublishBatch`).
    fn publish_batch<'a>(
        &'a self,
        topic_arn: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>>;

    /// Subscribes the queue of `queue_arn` to the topic with raw message delivery, so the
    /// queue receives the body and message attributes as they were published (`Subscribe`,
    /// idempotent for the same topic, queue and attributes).
    fn subscribe_queue<'a>(
        &'a self,
        topic_arn: &'a str,
        queue_arn: &'a str,
    ) -> BoxFuture<'a, Result<(), CallError>>;
}
