//! The calls to SQS (and SNS) and what they share: the `SqsApi` implementation over the AWS
//! SDK, the batch entries and their per-entry retry, backoff under a budget, the round trip as
//! measured, and the pressure an overloaded queue shows. Nothing here knows of receivers,
//! handlers or settlement.

pub(crate) mod aws;
pub(crate) mod aws_batch;
#[cfg(feature = "sns")]
pub(crate) mod aws_sns;
pub(crate) mod backoff;
pub(crate) mod batch;
pub(crate) mod caught;
pub(crate) mod lane;
pub(crate) mod pressure;
pub(crate) mod redrive_policy;
pub(crate) mod retry;
pub(crate) mod round_trip;
pub(crate) mod sleep;
#[cfg(feature = "sns")]
pub(crate) mod sns_api;
pub(crate) mod whole_seconds;
