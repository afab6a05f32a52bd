//! The handler's side: the message it gets, the outcome it returns, the policy for its errors
//! and its deadline, and the span it runs in. Nothing here calls SQS.

pub(crate) mod error_policy;
pub(crate) mod handler;
pub(crate) mod message;
pub(crate) mod message_span;
pub(crate) mod outcome;
pub(crate) mod processing_limit;
pub(crate) mod sns_envelope;
pub(crate) mod system_attributes;
#[cfg(feature = "opentelemetry")]
pub(crate) mod trace_context;
