//! A failed SQS call, and the kinds that decide whether it is retried.

use std::fmt;
use std::sync::Arc;

/// The kind of a failed SQS call, which decides whether it is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallErrorKind {
    /// SQS asked the caller to slow down. Transient.
    Throttled,
    /// SQS failed on its side (HTTP 5xx). Transient.
    Server,
    /// The request did not get an answer: connection refused or reset, timeout. Transient.
    Network,
    /// The queue does not exist.
    QueueNotFound,
    /// The credentials are missing, invalid or not allowed to make the call.
    AccessDenied,
    /// SQS refused the request as malformed or invalid.
    Invalid,
    /// The request could not be built or sent for a reason on this side.
    Other,
}

impl CallErrorKind {
    /// Whether the same call may succeed if made again.
    pub fn is_transient(self) -> bool {
        matches!(self, Self::Throttled | Self::Server | Self::Network)
    }

    /// A short, stable name, as used in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Throttled => "throttled",
            Self::Server => "server",
            Self::Network => "network",
            Self::QueueNotFound => "queue_not_found",
            Self::AccessDenied => "access_denied",
            Self::Invalid => "invalid",
            Self::Other => "other",
        }
    }
}

/// A failed SQS call.
///
/// Made with [`CallError::new`] (and [`with_code`](Self::with_code)). One from the AWS SDK
/// (through [`AwsSqs`](crate::AwsSqs)) keeps the SDK's error as its
/// [`source`](std::error::Error::source) and the [`request_id`](Self::request_id) AWS gave it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CallError {
    /// What kind of failure it was.
    pub kind: CallErrorKind,
    /// The error code SQS gave, when it answered.
    pub code: Option<String>,
    /// A description of the failure.
    pub message: String,
    /// The request id and the underlying error, when there are any (behind one pointer, so
    /// that errors carrying a `CallError` stay small).
    detail: Option<Arc<Detail>>,
}

#[derive(Debug, Default)]
struct Detail {
    request_id: Option<String>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl PartialEq for CallError {
    /// Equal in kind, code, message and request id (the source is not compared).
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.code == other.code
            && self.message == other.message
            && self.request_id() == other.request_id()
    }
}

impl Eq for CallError {}

impl CallError {
    /// A call error of `kind` with a description.
    pub fn new(kind: CallErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            code: None,
            message: message.into(),
            detail: None,
        }
    }

    /// The same error, with the error code SQS answered.
    #[must_use]
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// The same error, with the request id AWS gave the call and the error underneath.
    #[must_use]
    pub fn with_detail(
        mut self,
        request_id: Option<String>,
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        self.detail = Some(Arc::new(Detail { request_id, source }));
        self
    }

    /// The id AWS gave the request (`x-amzn-requestid`), when it answered: what AWS support
    /// asks for.
    pub fn request_id(&self) -> Option<&str> {
        self.detail.as_ref()?.request_id.as_deref()
    }

    /// Whether the same call may succeed if made again.
    pub fn is_transient(&self) -> bool {
        self.kind.is_transient()
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} ({}): {}", code, self.kind.as_str(), self.message),
            None => write!(f, "{}: {}", self.kind.as_str(), self.message),
        }
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let source = self.detail.as_ref()?.source.as_deref()?;
        Some(source as &(dyn std::error::Error + 'static))
    }
}

/// Whether an SQS error code means "slow down".
pub(crate) fn is_throttling_code(code: &str) -> bool {
    matches!(
        code,
        "Throttling"
            | "ThrottlingException"
            | "ThrottledException"
            | "RequestThrottled"
            | "RequestThrottledException"
            | "TooManyRequestsException"
            | "RequestLimitExceeded"
            | "SlowDown"
            | "KmsThrottled"
            | "AWS.SimpleQueueService.RequestThrottled"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_throttling_server_and_network_calls_are_retried() {
        use CallErrorKind::*;
        for kind in [Throttled, Server, Network] {
            assert!(kind.is_transient(), "{kind:?}");
        }
        for kind in [QueueNotFound, AccessDenied, Invalid, Other] {
            assert!(!kind.is_transient(), "{kind:?}");
        }
    }
}
