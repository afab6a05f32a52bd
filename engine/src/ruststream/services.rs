//! The SQS and SNS clients a connected broker's calls go through.

use std::sync::Arc;

use crate::api::SqsApi;

/// The services a destination's calls go to.
#[derive(Clone)]
pub(crate) struct Services {
    pub(crate) sqs: Arc<dyn SqsApi>,
    #[cfg(feature = "sns")]
    pub(crate) sns: Arc<dyn crate::sns_api::SnsApi>,
}
