//! [`SnsApi`] over `aws-sdk-sns`: the one module that talks to SNS (feature `sns`).

use std::time::Duration;

use aws_sdk_sns::Client;

use crate::api::{BoxFuture, CallError, EntryResult, SendEntry};
use crate::sqs::aws::{DEFAULT_CALL_TIMEOUT, classify, within};
use crate::sqs::aws_batch::{align, entry_failures, invalid_entry, send_entries};
use crate::sqs::sns_api::SnsApi;

/// The broker's connection to SNS through an `aws_sdk_sns::Client`, with the SDK's retries
/// off (the publish drivers retry transient failures themselves) and every call bounded by
/// [`DEFAULT_CALL_TIMEOUT`].
#[derive(Debug, Clone)]
pub(crate) struct AwsSns {
    client: Client,
    call_timeout: Duration,
}

impl AwsSns {
    /// A client from the same `aws-config` settings the SQS client is made from.
    pub(crate) fn new(config: aws_sdk_sns::config::Builder) -> Self {
        Self {
            client: Client::from_conf(config.build()),
            call_timeout: DEFAULT_CALL_TIMEOUT,
        }
    }
}

/// The client settings of the SNS calls, from `config`: no SDK retries, no stalled-stream
/// protection, as for SQS.
pub(crate) fn client_config(config: &aws_config::SdkConfig) -> aws_sdk_sns::config::Builder {
    aws_sdk_sns::config::Builder::from(config)
        .retry_config(aws_sdk_sns::config::retry::RetryConfig::disabled())
        .stalled_stream_protection(aws_sdk_sns::config::StalledStreamProtectionConfig::disabled())
}

impl SnsApi for AwsSns {
    fn create_topic<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        let mut call = self.client.create_topic().name(name);
        if name.ends_with(".fifo") {
            // SNS refuses a `.fifo` name unless the topic is created FIFO.
            call = call.attributes("FifoTopic", "true");
        }
        Box::pin(within(self.call_timeout, async move {
            let output = Box::pin(call.send()).await.map_err(classify)?;
            output.topic_arn.ok_or_else(|| {
                CallError::new(
                    crate::api::CallErrorKind::Other,
                    "CreateTopic answered no topic ARN",
                )
            })
        }))
    }

    fn publish_batch<'a>(
        &'a self,
        topic_arn: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        let built = send_entries!(aws_sdk_sns, PublishBatchRequestEntry, message, entries);
        let call = match built {
            Ok(built) => self
                .client
                .publish_batch()
                .topic_arn(topic_arn)
                .set_publish_batch_request_entries(Some(built)),
            Err(error) => return invalid_entry(error),
        };
        let count = entries.len();
        Box::pin(within(self.call_timeout, async move {
            let output = Box::pin(call.send()).await.map_err(classify)?;
            let successful = output
                .successful
                .iter()
                .flatten()
                .filter_map(|entry| entry.id.as_deref());
            let failed = entry_failures!(output.failed.unwrap_or_default());
            Ok(align(count, successful, failed))
        }))
    }

    fn subscribe_queue<'a>(
        &'a self,
        topic_arn: &'a str,
        queue_arn: &'a str,
    ) -> BoxFuture<'a, Result<(), CallError>> {
        let call = self
            .client
            .subscribe()
            .topic_arn(topic_arn)
            .protocol("sqs")
            .endpoint(queue_arn)
            .attributes("RawMessageDelivery", "true")
            .return_subscription_arn(true);
        Box::pin(within(self.call_timeout, async move {
            Box::pin(call.send()).await.map_err(classify)?;
            Ok(())
        }))
    }
}
