//! How many messages a queue on a real SQS (or LocalStack) holds, as its approximate counts
//! say: what the LocalStack-backed tests and the load test read to see that a run left
//! nothing behind.

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::QueueAttributeName;

use crate::api::CallError;
use crate::sqs::aws::classify;

/// A queue's messages, as `GetQueueAttributes` approximates them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueDepth {
    /// `ApproximateNumberOfMessages`: receivable now.
    pub visible: u64,
    /// `ApproximateNumberOfMessagesNotVisible`: received and not yet deleted or visible again.
    pub in_flight: u64,
}

/// Reads the approximate counts of the queue at `url` with one `GetQueueAttributes` call; a
/// count SQS leaves out reads as 0.
///
/// # Errors
///
/// The failed call, sorted as the engine sorts its own calls' failures.
///
/// # Cancel safety
///
/// Cancel safe: the call only reads.
pub async fn queue_depth(client: &Client, url: &str) -> Result<QueueDepth, CallError> {
    let output = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(classify)?;
    let read = |name: QueueAttributeName| {
        output
            .attributes()
            .and_then(|attributes| attributes.get(&name))
            .and_then(|value| value.parse().ok())
            .unwrap_or(0)
    };
    Ok(QueueDepth {
        visible: read(QueueAttributeName::ApproximateNumberOfMessages),
        in_flight: read(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
    })
}
