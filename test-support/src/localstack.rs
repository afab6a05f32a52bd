//! LocalStack: where it is, the SDK configured for it, and its log.

use std::path::PathBuf;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_sdk_sqs::Client;

/// LocalStack's default address.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:4566";

/// The endpoint of the tests: `SQS_ENGINE_TEST_ENDPOINT`, else `AWS_ENDPOINT_URL`, else
/// [`DEFAULT_ENDPOINT`].
pub fn endpoint() -> String {
    std::env::var("SQS_ENGINE_TEST_ENDPOINT")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .unwrap_or_else(|_| DEFAULT_ENDPOINT.to_owned())
}

/// The SDK configuration of the tests, talking to [`endpoint`].
pub async fn sdk_config() -> SdkConfig {
    sdk_config_at(&endpoint()).await
}

/// The SDK configuration of the tests, talking to `endpoint` (a [`Proxy`]'s URL, say):
/// credentials test/test, region us-east-1.
///
/// [`Proxy`]: crate::proxy::Proxy
pub async fn sdk_config_at(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "tests"))
        .load()
        .await
}

/// An SQS client talking to [`endpoint`].
pub async fn client() -> Client {
    Client::new(&sdk_config().await)
}

/// An SQS client talking to `endpoint`.
pub async fn client_at(endpoint: &str) -> Client {
    Client::new(&sdk_config_at(endpoint).await)
}

/// Calls of `action` in a stretch of LocalStack's log (every client's calls, all queues).
pub fn logged_calls(log: &str, action: &str) -> usize {
    let needle = format!("AWS sqs.{action} =>");
    log.lines().filter(|line| line.contains(&needle)).count()
}

/// Where LocalStack writes its log: `SQS_ENGINE_LOCALSTACK_LOG`, else where
/// `scripts/localstack.sh` puts it.
pub fn localstack_log_path() -> PathBuf {
    if let Ok(path) = std::env::var("SQS_ENGINE_LOCALSTACK_LOG") {
        return path.into();
    }
    let cache = std::env::var("SQS_ENGINE_CACHE").map_or_else(
        |_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/sqs-engine"),
        PathBuf::from,
    );
    let port = std::env::var("LOCALSTACK_PORT").unwrap_or_else(|_| "4566".to_owned());
    cache.join(format!("localstack-{port}.log"))
}

/// LocalStack's log so far.
///
/// # Panics
///
/// When the log cannot be read: LocalStack was not started with `scripts/localstack.sh`.
pub fn read_log() -> String {
    let path = localstack_log_path();
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "LocalStack's log at {} is needed to check the engine's call counts ({e}); \
             start LocalStack with scripts/localstack.sh",
            path.display()
        )
    })
}
