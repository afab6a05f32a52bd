//! The limits SQS sets that the engine holds to, each stated once.

use std::time::Duration;

/// The longest visibility timeout SQS takes, in seconds (12 hours); also how long after its
/// receive a message may stay hidden at the most.
pub const MAX_VISIBILITY_SECS: u32 = 12 * 60 * 60;

/// [`MAX_VISIBILITY_SECS`] as a duration: SQS refuses a visibility that ends more than 12 hours
/// after the receive.
pub const MAX_VISIBILITY: Duration = Duration::from_secs(MAX_VISIBILITY_SECS as u64);
