//! SNS topics by name (feature `sns`): the topic a destination names, and its ARN.

use std::borrow::Cow;

use super::queue::queue_name;
use super::services::Services;
use crate::api::CallError;
use crate::backoff::Backoff;
use crate::metrics::CallCounts;
use crate::retry::retrying;

/// The topic a destination names: an ARN as it is, a name mapped onto the characters SNS takes
/// the way a queue name is (see [`super::queue_name`]), a `.fifo` suffix kept.
pub(crate) fn topic_name(destination: &str) -> Cow<'_, str> {
    if destination.starts_with("arn:") {
        Cow::Borrowed(destination)
    } else {
        queue_name(destination)
    }
}

/// The ARN of `topic` (a name or ARN): an ARN as it is; a name through `CreateTopic`, which
/// finds the topic of that name or creates it (FIFO for a `.fifo` name).
pub(crate) async fn topic_arn(
    services: &Services,
    backoff: Backoff,
    topic: &str,
) -> Result<String, CallError> {
    if topic.starts_with("arn:") {
        return Ok(topic.to_owned());
    }
    let created = retrying(&backoff, || services.sns.create_topic(topic)).await;
    CallCounts::single(topic, "CreateTopic", created.is_ok());
    created
}
