//! The SQS a load test talks to: endpoint, region and credentials, and the queue on it.
//!
//! Today the target is any SQS endpoint reached through `aws-config` (AWS itself, or
//! LocalStack and other local implementations through `--endpoint`). Other kinds of target
//! (an embedded server, say) can be added here without touching the subcommands, which only
//! see an [`SdkConfig`] and a queue URL.

use anyhow::{Context, Result, bail};
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::DisplayErrorContext;
use sqs_engine::queue_url::{is_url, last_segment};
use tracing::{info, warn};

/// The region used with an explicit endpoint when none is given.
const DEFAULT_ENDPOINT_REGION: &str = "us-east-1";

/// The access key and secret used with a loopback endpoint when the environment holds no
/// credentials: what LocalStack and most local SQS implementations accept.
const TEST_CREDENTIALS: (&str, &str) = ("test", "test");

/// Environment variables that, when set, mean the environment supplies credentials (or says
/// where to find them), so the SDK's own resolution is used even with an explicit endpoint.
const CREDENTIAL_ENV_VARS: [&str; 5] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
];

/// Where SQS is: the connection options every subcommand shares.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct TargetArgs {
    /// SQS endpoint URL, e.g. http://127.0.0.1:4566 for LocalStack. Without it, the SDK's
    /// default endpoint for the region. Credentials come from the SDK's provider chain
    /// (environment, profile, SSO, web identity, container, instance); for a loopback endpoint
    /// with none in the environment, static `test`/`test` ones, and a log line says so.
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    pub(crate) endpoint: Option<String>,

    /// AWS region. Without it: us-east-1 when an endpoint is given, else the SDK's default
    /// resolution (environment, profile, instance metadata).
    #[arg(long, env = "AWS_REGION")]
    pub(crate) region: Option<String>,
}

/// Where SQS is and which queue on it: the options of the subcommands that work on one
/// queue.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct QueueTarget {
    /// Where SQS is.
    #[command(flatten)]
    pub(crate) target: TargetArgs,

    /// The queue, by name or URL.
    #[arg(long)]
    pub(crate) queue: String,
}

impl TargetArgs {
    /// Resolves the SDK configuration: the endpoint, region and credentials as the arguments
    /// and the environment say.
    ///
    /// Credentials come from the SDK's provider chain, except with a loopback endpoint and no
    /// credentials in the environment (see [`CREDENTIAL_ENV_VARS`]): then static `test`/`test`
    /// ones, so a local SQS works without any setup, with a warning saying so.
    pub(crate) async fn sdk_config(&self) -> SdkConfig {
        self.load(Notice::Warn).await
    }

    /// As [`sdk_config`](Self::sdk_config), with the test-credentials notice at `info`: for
    /// the comparison's own processes, whose parent already said where they point.
    pub(crate) async fn sdk_config_quietly(&self) -> SdkConfig {
        self.load(Notice::Info).await
    }

    async fn load(&self, notice: Notice) -> SdkConfig {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        let region = self.region.clone().or_else(|| {
            self.endpoint
                .as_ref()
                .map(|_| DEFAULT_ENDPOINT_REGION.to_owned())
        });
        if let Some(region) = &region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let Some(endpoint) = &self.endpoint {
            loader = loader.endpoint_url(endpoint);
            if is_loopback(endpoint) && !environment_has_credentials() {
                let text = "loopback endpoint and no credentials in the environment: using static test credentials";
                match notice {
                    Notice::Warn => warn!(%endpoint, "{text}"),
                    Notice::Info => info!(%endpoint, "{text}"),
                }
                let (key, secret) = TEST_CREDENTIALS;
                loader = loader.credentials_provider(Credentials::new(
                    key,
                    secret,
                    None,
                    None,
                    "loadtest-static",
                ));
            }
        }
        let config = loader.load().await;
        info!(
            endpoint = config.endpoint_url().unwrap_or("(SDK default)"),
            region = config.region().map_or("(unresolved)", Region::as_ref),
            "SDK configuration loaded"
        );
        config
    }
}

/// How loudly [`TargetArgs::load`] says it uses test credentials.
#[derive(Debug, Clone, Copy)]
enum Notice {
    Warn,
    Info,
}

/// Whether `endpoint` (a URL) names this host: `localhost`, or a loopback address.
fn is_loopback(endpoint: &str) -> bool {
    let rest = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = if let Some(bracketed) = host_port.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or(bracketed)
    } else {
        host_port.split(':').next().unwrap_or(host_port)
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether any of [`CREDENTIAL_ENV_VARS`] is set to a non-empty value.
fn environment_has_credentials() -> bool {
    CREDENTIAL_ENV_VARS
        .iter()
        .any(|var| std::env::var_os(var).is_some_and(|value| !value.is_empty()))
}

/// The URL of `queue` (a name or a URL).
///
/// A URL is used as it is, unless `create` is set, in which case the queue is created from
/// the name at the end of the URL when it is missing. A name is resolved with `GetQueueUrl`;
/// when the queue does not exist and `create` is set, it is created with `CreateQueue` and
/// default attributes.
///
/// # Errors
///
/// When the queue does not exist and `create` is not set, when the name is a FIFO queue
/// (`.fifo`; not supported yet), or when a call fails.
pub(crate) async fn resolve_queue_url(
    client: &Client,
    queue: &str,
    create: bool,
) -> Result<String> {
    let name = if is_url(queue) {
        if !create {
            return Ok(queue.to_owned());
        }
        Some(last_segment(queue))
            .filter(|name| !name.is_empty())
            .with_context(|| format!("no queue name at the end of the URL `{queue}`"))?
    } else {
        queue
    };
    if name.ends_with(".fifo") {
        bail!("queue `{name}` is a FIFO queue; the load test supports standard queues only");
    }
    match client.get_queue_url().queue_name(name).send().await {
        Ok(output) => output
            .queue_url
            .with_context(|| format!("GetQueueUrl for `{name}` answered no URL")),
        Err(error)
            if error
                .as_service_error()
                .is_some_and(|e| e.is_queue_does_not_exist()) =>
        {
            if !create {
                bail!("queue `{name}` does not exist (pass --create to create it)");
            }
            info!(queue = name, "creating the queue");
            let output = client
                .create_queue()
                .queue_name(name)
                .send()
                .await
                .map_err(|e| {
                    anyhow::anyhow!(
                        "CreateQueue for `{name}` failed: {}",
                        DisplayErrorContext(e)
                    )
                })?;
            output
                .queue_url
                .with_context(|| format!("CreateQueue for `{name}` answered no URL"))
        }
        Err(error) => Err(anyhow::anyhow!(
            "GetQueueUrl for `{name}` failed: {}",
            DisplayErrorContext(error)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_host_is_a_loopback_endpoint() {
        for endpoint in [
            "http://127.0.0.1:4566",
            "http://localhost:4566/",
            "http://LOCALHOST",
            "http://[::1]:9324/queue",
            "http://127.0.0.2:80",
            "http://user@127.0.0.1:1",
        ] {
            assert!(is_loopback(endpoint), "{endpoint}");
        }
        for endpoint in [
            "https://sqs.us-east-1.amazonaws.com",
            "http://10.0.0.5:4566",
            "http://localstack:4566",
            "http://127.0.0.1.example.com",
            "http://[2001:db8::1]:4566",
        ] {
            assert!(!is_loopback(endpoint), "{endpoint}");
        }
    }
}
