//! [`SqsApi`] over `aws-sdk-sqs`: the one module that talks to SQS.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::StalledStreamProtectionConfig;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::operation::RequestId;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
    MessageSystemAttributeName, QueueAttributeName,
};

use crate::api::{
    BoxFuture, CallError, CallErrorKind, EntryResult, QueueAttributes, ReceiveRequest,
    ReceivedMessage, SendEntry, SqsApi, is_throttling_code,
};
use crate::attribute::{AttributeValue, MessageAttribute};
use crate::sqs::aws_batch::{ENTRY_IDS, align, entry_failures, invalid_entry, send_entries};

/// The engine's connection to SQS through an `aws_sdk_sqs::Client`.
///
/// Made with [`from_sdk_config`](Self::from_sdk_config), the client's own retries are turned
/// off: the engine retries transient failures itself, with backoff and jitter, and counts each
/// call. Made from a client with [`new`](Self::new), the client is used as it is.
///
/// Every call gets an answer within [`DEFAULT_CALL_TIMEOUT`] (a long poll: within its wait and
/// that), or is abandoned and reported as a [`Network`](CallErrorKind::Network) failure, which
/// the engine retries like any other. Without a bound, a call on a connection that went silent
/// (a half-open TCP connection behind a NAT, say) could wait for many minutes, and with it a
/// receiver or the settlements of a whole batch. Change it with
/// [`with_call_timeout`](Self::with_call_timeout).
#[derive(Debug, Clone)]
pub struct AwsSqs {
    client: Client,
    call_timeout: Duration,
}

/// How long a call may go unanswered, a long poll's wait aside: 10 s, hundreds of times what
/// SQS usually takes.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

impl AwsSqs {
    /// Uses `client` as it is configured, its retry policy included.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        }
    }

    /// A client from an `aws-config` [`SdkConfig`](aws_types::SdkConfig) (credentials, region,
    /// endpoint, `AWS_ENDPOINT_URL`), with the SDK's own retries turned off, and its
    /// stalled-stream protection too: the call timeout bounds a whole call, a stalled body
    /// included, at less cost.
    pub fn from_sdk_config(config: &aws_types::SdkConfig) -> Self {
        Self::new(Client::from_conf(client_config(config).build()))
    }

    /// Abandons a call with no answer after `timeout` (a long poll: after its wait and
    /// `timeout`), reporting it as a network failure. Default [`DEFAULT_CALL_TIMEOUT`].
    #[must_use]
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The client underneath.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

/// The client settings the engine makes its calls with, from `config`: no SDK retries (the
/// engine retries, and counts) and no stalled-stream protection (the call timeout covers it).
pub(crate) fn client_config(config: &aws_types::SdkConfig) -> aws_sdk_sqs::config::Builder {
    aws_sdk_sqs::config::Builder::from(config)
        .retry_config(RetryConfig::disabled())
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
}

/// `call`'s answer, or a network failure once `limit` has passed without one.
///
/// The SDK's call futures are large, so every call boxes its `send()` future where it is made:
/// `call` and the futures around it then hold a pointer, and moving them (several times a
/// call) copies only that, not the call's whole state.
pub(crate) async fn within<T>(
    limit: Duration,
    call: impl Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    tokio::time::timeout(limit, call).await.unwrap_or_else(|_| {
        Err(CallError::new(
            CallErrorKind::Network,
            format!("no answer within {limit:?}: the call was abandoned"),
        ))
    })
}

/// The answer to one of `aws-sdk-sqs`'s batch calls (`$call`: `send_message_batch`,
/// `delete_message_batch` or `change_message_visibility_batch`, whose outputs list
/// `successful` and `failed` entries alike) to `$queue_url` with `$entries`, the request
/// entries as built (`Result<Vec<_>, BuildError>`), made by `$sqs` (an [`AwsSqs`]): one result
/// per entry, in request order (see [`align`]); the call's failure, within its timeout; or,
/// without calling, an invalid call when an entry could not be built.
macro_rules! batch_call {
    ($sqs:expr, $call:ident, $queue_url:expr, $entries:expr) => {
        match $entries {
            Ok(entries) => {
                let count = entries.len();
                let call = $sqs
                    .client
                    .$call()
                    .queue_url($queue_url)
                    .set_entries(Some(entries));
                Box::pin(within($sqs.call_timeout, async move {
                    let output = Box::pin(call.send()).await.map_err(classify)?;
                    let successful = output.successful.iter().map(|entry| entry.id.as_str());
                    Ok(align(count, successful, entry_failures!(output.failed)))
                }))
            }
            Err(error) => invalid_entry(error),
        }
    };
}

impl SqsApi for AwsSqs {
    fn queue_url<'a>(&'a self, queue_name: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        let call = self.client.get_queue_url().queue_name(queue_name);
        Box::pin(within(self.call_timeout, async move {
            let output = Box::pin(call.send()).await.map_err(classify)?;
            answered_url(output.queue_url, "GetQueueUrl")
        }))
    }

    fn create_queue<'a>(
        &'a self,
        queue_name: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        let call = self
            .client
            .create_queue()
            .queue_name(queue_name)
            .set_attributes(Some(attribute_map(attributes)));
        Box::pin(within(self.call_timeout, async move {
            let output = Box::pin(call.send()).await.map_err(classify)?;
            answered_url(output.queue_url, "CreateQueue")
        }))
    }

    fn queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
    ) -> BoxFuture<'a, Result<QueueAttributes, CallError>> {
        let call = self
            .client
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(QueueAttributeName::All);
        Box::pin(within(self.call_timeout, async move {
            let output = Box::pin(call.send()).await.map_err(classify)?;
            let mut attributes = output.attributes.unwrap_or_default();
            Ok(QueueAttributes {
                arn: attributes.remove(&QueueAttributeName::QueueArn),
                visibility_timeout: attributes
                    .get(&QueueAttributeName::VisibilityTimeout)
                    .and_then(|v| v.parse().ok()),
                fifo: attributes
                    .get(&QueueAttributeName::FifoQueue)
                    .is_some_and(|v| v.eq_ignore_ascii_case("true")),
                redrive_policy: attributes.remove(&QueueAttributeName::RedrivePolicy),
                policy: attributes.remove(&QueueAttributeName::Policy),
            })
        }))
    }

    fn set_queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<(), CallError>> {
        let call = self
            .client
            .set_queue_attributes()
            .queue_url(queue_url)
            .set_attributes(Some(attribute_map(attributes)));
        Box::pin(within(self.call_timeout, async move {
            Box::pin(call.send()).await.map_err(classify)?;
            Ok(())
        }))
    }

    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        let call = self
            .client
            .receive_message()
            .queue_url(request.queue_url)
            .max_number_of_messages(i32::from(request.max_messages))
            .wait_time_seconds(saturating_i32(request.wait_time.as_secs()))
            .visibility_timeout(saturating_i32(u64::from(request.visibility_timeout)))
            .set_message_system_attribute_names(Some(
                request
                    .system_attributes
                    .iter()
                    .map(|name| MessageSystemAttributeName::from(*name))
                    .collect(),
            ))
            .message_attribute_names("All")
            .set_receive_request_attempt_id(request.attempt_id.map(str::to_owned));
        Box::pin(within(request.wait_time + self.call_timeout, async move {
            let output = Box::pin(call.send()).await.map_err(classify)?;
            Ok(output
                .messages
                .unwrap_or_default()
                .into_iter()
                .map(convert_message)
                .collect())
        }))
    }

    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        let built = receipt_handles
            .iter()
            .enumerate()
            .map(|(position, handle)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(ENTRY_IDS[position])
                    .receipt_handle(*handle)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>();
        batch_call!(self, delete_message_batch, queue_url, built)
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        let built = entries
            .iter()
            .enumerate()
            .map(|(position, (handle, seconds))| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(ENTRY_IDS[position])
                    .receipt_handle(*handle)
                    .visibility_timeout(saturating_i32(u64::from(*seconds)))
                    .build()
            })
            .collect::<Result<Vec<_>, _>>();
        batch_call!(self, change_message_visibility_batch, queue_url, built)
    }

    fn send_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        let built = send_entries!(
            aws_sdk_sqs,
            SendMessageBatchRequestEntry,
            message_body,
            entries
        );
        batch_call!(self, send_message_batch, queue_url, built)
    }
}

/// Queue attributes as the SDK takes them, by name.
fn attribute_map(attributes: &[(&str, String)]) -> HashMap<QueueAttributeName, String> {
    attributes
        .iter()
        .map(|(name, value)| (QueueAttributeName::from(*name), value.clone()))
        .collect()
}

/// The queue URL `action` answered, or a failure when it answered none.
fn answered_url(url: Option<String>, action: &str) -> Result<String, CallError> {
    url.ok_or_else(|| CallError::new(CallErrorKind::Other, format!("{action} answered no URL")))
}

fn convert_message(message: aws_sdk_sqs::types::Message) -> ReceivedMessage {
    let attributes = message
        .attributes
        .unwrap_or_default()
        .into_iter()
        .map(|(name, value)| (name.as_str().to_owned(), value))
        .collect();
    let message_attributes = message
        .message_attributes
        .unwrap_or_default()
        .into_iter()
        .map(|(name, value)| {
            let converted = match (value.string_value, value.binary_value) {
                (_, Some(binary)) => AttributeValue::Binary(binary.into_inner()),
                (Some(text), None) => AttributeValue::String(text),
                (None, None) => AttributeValue::String(String::new()),
            };
            (
                name,
                MessageAttribute {
                    data_type: value.data_type,
                    value: converted,
                },
            )
        })
        .collect::<HashMap<_, _>>();
    ReceivedMessage {
        message_id: message.message_id.unwrap_or_default(),
        receipt_handle: message.receipt_handle.unwrap_or_default(),
        body: message.body.unwrap_or_default(),
        attributes,
        message_attributes,
    }
}

fn saturating_i32(value: u64) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// Sorts an SDK error into the kinds the engine acts on.
pub(crate) fn classify<E, R>(error: SdkError<E, R>) -> CallError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + HttpStatus + Send + Sync + 'static,
{
    let message = DisplayErrorContext(&error).to_string();
    let (kind, code, request_id) = match &error {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            (CallErrorKind::Network, None, None)
        }
        SdkError::ServiceError(context) => {
            let code = context.err().code().map(str::to_owned);
            let status = context.raw().status();
            let request_id = RequestId::request_id(context.err().meta()).map(str::to_owned);
            (kind_of(code.as_deref(), status), code, request_id)
        }
        _ => (CallErrorKind::Other, None, None),
    };
    let mut call_error =
        CallError::new(kind, message).with_detail(request_id, Some(Box::new(error)));
    call_error.code = code;
    call_error
}

/// The status code of a raw response.
pub(crate) trait HttpStatus {
    fn status(&self) -> u16;
}

impl HttpStatus for aws_sdk_sqs::config::http::HttpResponse {
    fn status(&self) -> u16 {
        aws_sdk_sqs::config::http::HttpResponse::status(self).as_u16()
    }
}

fn kind_of(code: Option<&str>, status: u16) -> CallErrorKind {
    let code = code.unwrap_or_default();
    if is_throttling_code(code) || status == 429 {
        return CallErrorKind::Throttled;
    }
    match code {
        "QueueDoesNotExist" | "AWS.SimpleQueueService.NonExistentQueue" => {
            return CallErrorKind::QueueNotFound;
        }
        "AccessDenied"
        | "AccessDeniedException"
        | "InvalidClientTokenId"
        | "UnrecognizedClientException"
        | "SignatureDoesNotMatch"
        | "InvalidSecurity"
        | "MissingAuthenticationToken"
        | "ExpiredToken"
        | "RequestExpired" => return CallErrorKind::AccessDenied,
        // SQS's own codes (`x-amzn-query-error`, as the SDK reads them) and its JSON shapes'.
        "KMS.AccessDeniedException"
        | "KMS.DisabledException"
        | "KMS.InvalidKeyUsageException"
        | "KMS.InvalidStateException"
        | "KMS.NotFoundException"
        | "KMS.OptInRequired"
        | "KmsAccessDenied"
        | "KmsDisabled"
        | "KmsInvalidKeyUsage"
        | "KmsInvalidState"
        | "KmsNotFound"
        | "KmsOptInRequired" => return CallErrorKind::KmsRefused,
        "InvalidAddress"
        | "AWS.SimpleQueueService.UnsupportedOperation"
        | "UnsupportedOperation" => return CallErrorKind::Unsupported,
        "InternalError" | "InternalFailure" | "ServiceUnavailable" => {
            return CallErrorKind::Server;
        }
        _ => {}
    }
    if status >= 500 {
        CallErrorKind::Server
    } else {
        CallErrorKind::Invalid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_sorted_by_code_then_status() {
        assert_eq!(
            kind_of(Some("RequestThrottled"), 400),
            CallErrorKind::Throttled
        );
        assert_eq!(kind_of(None, 429), CallErrorKind::Throttled);
        assert_eq!(
            kind_of(Some("QueueDoesNotExist"), 400),
            CallErrorKind::QueueNotFound
        );
        assert_eq!(
            kind_of(Some("AWS.SimpleQueueService.NonExistentQueue"), 400),
            CallErrorKind::QueueNotFound
        );
        assert_eq!(
            kind_of(Some("AccessDenied"), 403),
            CallErrorKind::AccessDenied
        );
        for code in [
            "KMS.AccessDeniedException",
            "KMS.DisabledException",
            "KMS.InvalidKeyUsageException",
            "KMS.InvalidStateException",
            "KMS.NotFoundException",
            "KMS.OptInRequired",
            "KmsAccessDenied",
            "KmsDisabled",
            "KmsInvalidKeyUsage",
            "KmsInvalidState",
            "KmsNotFound",
            "KmsOptInRequired",
        ] {
            assert_eq!(
                kind_of(Some(code), 400),
                CallErrorKind::KmsRefused,
                "{code}"
            );
        }
        for code in ["KMS.ThrottlingException", "KmsThrottled"] {
            assert_eq!(kind_of(Some(code), 400), CallErrorKind::Throttled, "{code}");
        }
        for code in [
            "InvalidAddress",
            "AWS.SimpleQueueService.UnsupportedOperation",
            "UnsupportedOperation",
        ] {
            assert_eq!(
                kind_of(Some(code), 400),
                CallErrorKind::Unsupported,
                "{code}"
            );
        }
        assert_eq!(
            kind_of(Some("InvalidSecurity"), 403),
            CallErrorKind::AccessDenied
        );
        // A receive over the in-flight limit: it clears as messages are settled.
        assert_eq!(kind_of(Some("OverLimit"), 403), CallErrorKind::Invalid);
        assert_eq!(kind_of(Some("Whatever"), 503), CallErrorKind::Server);
        assert_eq!(kind_of(Some("InternalError"), 400), CallErrorKind::Server);
        assert_eq!(
            kind_of(Some("InvalidParameterValue"), 400),
            CallErrorKind::Invalid
        );
    }
}
