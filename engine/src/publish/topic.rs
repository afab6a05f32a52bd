//! An SNS topic's ARN from its name (feature `sns`).

use super::services::Services;
use crate::api::CallError;
use crate::metrics::CallCounts;
use crate::sqs::backoff::Backoff;
use crate::sqs::retry::retrying;

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
    let sns = services.sns()?;
    let created = retrying(&backoff, || sns.create_topic(topic)).await;
    CallCounts::single(topic, "CreateTopic", created.is_ok());
    created
}
