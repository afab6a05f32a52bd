//! What the broker tells the framework's AsyncAPI document (feature `asyncapi`) of the server
//! it reaches; the channels' bindings are in `bindings`.
//!
//! Everything is read off the declarations, before anything connects. The document is the one
//! `ruststream-sqs-sns` generates for the same service.

use ::ruststream::{DescribeServer, ServerSpec};
use aws_config::SdkConfig;
use aws_sdk_sqs::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use futures::FutureExt;

use super::broker::SqsBroker;

/// The public service's host, when neither an endpoint nor a region is known.
const PUBLIC_HOST: &str = "sqs.amazonaws.com";

impl DescribeServer for SqsBroker {
    /// The host (and port) clients reach: the broker's endpoint, else the endpoint of the
    /// [`SdkConfig`] it was made from, else the regional host of its region as the SDK's
    /// endpoint rules give it (`sqs.eu-west-1.amazonaws.com`, `sqs.cn-north-1.amazonaws.com.cn`),
    /// else `sqs.amazonaws.com`. Never a scheme or credentials.
    fn describe_server(&self) -> ServerSpec {
        let configured = self.sdk_config();
        let host = [
            self.endpoint_url(),
            configured.and_then(SdkConfig::endpoint_url),
        ]
        .into_iter()
        .flatten()
        .map(ServerSpec::host_from_url)
        .find(|host| !host.is_empty())
        .or_else(|| {
            let region = self
                .region_name()
                .or_else(|| configured.and_then(SdkConfig::region).map(AsRef::as_ref))?;
            regional_host(region, configured)
        })
        .unwrap_or_else(|| PUBLIC_HOST.to_owned());
        ServerSpec::new(host, "sqs")
    }
}

/// The host the SDK's endpoint rules give an SQS client in `region`.
fn regional_host(region: &str, configured: Option<&SdkConfig>) -> Option<String> {
    let params = Params::builder()
        .region(region)
        .set_use_fips(configured.and_then(SdkConfig::use_fips))
        .set_use_dual_stack(configured.and_then(SdkConfig::use_dual_stack))
        .build()
        .ok()?;
    // The default rules are computed in place: the future is ready at once.
    let endpoint = DefaultResolver::new()
        .resolve_endpoint(&params)
        .now_or_never()?
        .ok()?;
    Some(ServerSpec::host_from_url(endpoint.url())).filter(|host| !host.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(broker: &SqsBroker) -> String {
        broker.describe_server().host.unwrap_or_default()
    }

    #[test]
    fn the_endpoint_then_the_region_then_the_public_host_describe_the_server() {
        let local = SqsBroker::new()
            .endpoint("http://user:secret@localhost:4566/")
            .region("eu-west-1");
        assert_eq!(host(&local), "localhost:4566");
        assert_eq!(
            host(&SqsBroker::new().region("eu-west-1")),
            "sqs.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            host(&SqsBroker::new().region("cn-north-1")),
            "sqs.cn-north-1.amazonaws.com.cn"
        );
        assert_eq!(host(&SqsBroker::new()), PUBLIC_HOST);
        assert_eq!(SqsBroker::new().describe_server().protocol, "sqs");
    }
}
