//! The SQS (and with feature `sns`, SNS) clients a publisher's calls go through.

use std::sync::Arc;

use crate::api::SqsApi;
#[cfg(feature = "sns")]
use crate::api::{CallError, CallErrorKind};

/// The services a destination's calls go to.
#[derive(Clone)]
pub(crate) struct Services {
    pub(crate) sqs: Arc<dyn SqsApi>,
    /// SNS, for topics: a broker's publisher has it, a native one sends to queues only.
    #[cfg(feature = "sns")]
    pub(crate) sns: Option<Arc<dyn crate::sqs::sns_api::SnsApi>>,
}

impl Services {
    /// SQS alone.
    pub(crate) fn sqs(sqs: Arc<dyn SqsApi>) -> Self {
        Self {
            sqs,
            #[cfg(feature = "sns")]
            sns: None,
        }
    }

    /// SNS, or the error of a call that needs it on a publisher without it.
    ///
    /// # Errors
    ///
    /// A [`CallError`] of kind [`CallErrorKind::Invalid`] when there is no SNS client.
    #[cfg(feature = "sns")]
    pub(crate) fn sns(&self) -> Result<&Arc<dyn crate::sqs::sns_api::SnsApi>, CallError> {
        self.sns.as_ref().ok_or_else(|| {
            CallError::new(
                CallErrorKind::Invalid,
                "this publisher has no SNS client: it sends to SQS queues only",
            )
        })
    }
}
