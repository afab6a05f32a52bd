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
    /// The queue's KMS key refused the call: the caller may not use the key, or the key is
    /// disabled, pending deletion, gone, or not usable for the call (SQS's
    /// `KMS.AccessDeniedException`, `KMS.DisabledException`, `KMS.NotFoundException`,
    /// `KMS.InvalidStateException`, `KMS.InvalidKeyUsageException`, `KMS.OptInRequired`). KMS
    /// throttling is [`Throttled`](Self::Throttled).
    KmsRefused,
    /// SQS does not take the call as addressed: the queue URL names no valid account
    /// (`InvalidAddress`), or the operation is not supported (`UnsupportedOperation`).
    Unsupported,
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

    /// Whether the failure stops the engine's work until someone acts on the queue, the
    /// credentials or the key: the queue does not exist, the credentials or the KMS key are
    /// refused, the call is not supported. Retrying cannot mend it (it is never
    /// [transient](Self::is_transient)). A receive, delete or visibility change failing so
    /// makes the engine unhealthy at once, and makes it give up once no success (nor a failure
    /// that is neither transient nor permanent) has come for
    /// [`give_up_after`](crate::EngineBuilder::give_up_after): transient failures in between
    /// do not restart that time.
    ///
    /// [`Invalid`](Self::Invalid) and [`Other`](Self::Other) are neither transient nor
    /// permanent: a call refused as malformed says nothing of the next one.
    pub fn is_permanent(self) -> bool {
        matches!(
            self,
            Self::QueueNotFound | Self::AccessDenied | Self::KmsRefused | Self::Unsupported
        )
    }

    /// A short, stable name, as used in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Throttled => "throttled",
            Self::Server => "server",
            Self::Network => "network",
            Self::QueueNotFound => "queue_not_found",
            Self::AccessDenied => "access_denied",
            Self::KmsRefused => "kms_refused",
            Self::Unsupported => "unsupported",
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
            | "KMS.ThrottlingException"
            | "AWS.SimpleQueueService.RequestThrottled"
    )
}

#[cfg(test)]
mod tests {
    use super::CallErrorKind::{self, *};

    /// The kinds, in three parts: retried, never retried because nothing on the caller's side
    /// mends them, and neither.
    const TRANSIENT: [CallErrorKind; 3] = [Throttled, Server, Network];
    const PERMANENT: [CallErrorKind; 4] = [QueueNotFound, AccessDenied, KmsRefused, Unsupported];
    const NEITHER: [CallErrorKind; 2] = [Invalid, Other];

    #[test]
    fn only_throttling_server_and_network_calls_are_retried() {
        for kind in TRANSIENT {
            assert!(kind.is_transient(), "{kind:?}");
        }
        for kind in PERMANENT.into_iter().chain(NEITHER) {
            assert!(!kind.is_transient(), "{kind:?}");
        }
    }

    #[test]
    fn a_missing_queue_and_refused_credentials_key_or_call_are_permanent_and_never_transient() {
        for kind in PERMANENT {
            assert!(kind.is_permanent() && !kind.is_transient(), "{kind:?}");
        }
        for kind in TRANSIENT.into_iter().chain(NEITHER) {
            assert!(!kind.is_permanent(), "{kind:?}");
        }
    }
}
