//! Bodies too large for SQS, stored in S3 as AWS's extended client libraries store them: the
//! message carries a pointer to the object, and a marking attribute.
//!
//! With the `s3` feature, [`LargePayloads`] given to
//! [`EngineBuilder::large_payloads`](crate::EngineBuilder::large_payloads) (or to the broker)
//! resolves a pointer before the handler sees the message, and the publishers (the native
//! [`Publisher`](crate::Publisher) and the broker's) store a body over the threshold. Without it, [`Payloads`] is empty and a pointer reaches the handler
//! as it was received.

#[cfg(feature = "s3")]
mod config;
#[cfg(feature = "s3")]
mod fetch;
#[cfg(feature = "s3")]
pub(crate) mod pointer;
#[cfg(feature = "s3")]
mod store;

#[cfg(feature = "s3")]
pub use config::LargePayloads;

#[cfg(feature = "s3")]
use std::sync::Arc;

use crate::api::ReceivedMessage;

/// What a queue does with bodies stored in S3: nothing, unless the engine was given
/// [`LargePayloads`].
#[derive(Clone, Default)]
pub(crate) struct Payloads {
    #[cfg(feature = "s3")]
    pub(crate) s3: Option<Arc<LargePayloads>>,
}

impl Payloads {
    /// The bytes `message` takes among the bytes held: its size as SQS counts it, or the size
    /// its marking attribute declares for a body stored in S3, if larger.
    pub(crate) fn held_bytes(&self, message: &ReceivedMessage) -> usize {
        #[cfg(feature = "s3")]
        if self.s3.is_some() {
            return message
                .size()
                .max(pointer::declared_size(&message.message_attributes).unwrap_or(0));
        }
        message.size()
    }
}

impl std::fmt::Debug for Payloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        #[cfg(feature = "s3")]
        let on = self.s3.is_some();
        #[cfg(not(feature = "s3"))]
        let on = false;
        f.debug_struct("Payloads").field("s3", &on).finish()
    }
}

#[cfg(all(test, feature = "s3"))]
mod tests {
    use std::collections::HashMap;

    use std::sync::Arc;

    use super::*;
    use crate::attribute::{AttributeValue, MessageAttribute};

    fn pointer_message() -> ReceivedMessage {
        ReceivedMessage {
            message_id: "m".into(),
            receipt_handle: "r".into(),
            body: r#"["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}]"#.into(),
            attributes: HashMap::new(),
            message_attributes: HashMap::from([(
                "ExtendedPayloadSize".to_owned(),
                MessageAttribute {
                    data_type: "Number".into(),
                    value: AttributeValue::String("300000".into()),
                },
            )]),
        }
    }

    #[test]
    fn a_stored_body_is_held_at_its_declared_size_only_where_it_is_fetched() {
        let message = pointer_message();
        assert_eq!(Payloads::default().held_bytes(&message), message.size());
        let client = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::Config::builder()
                .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
                .build(),
        );
        let fetching = Payloads {
            s3: Some(Arc::new(LargePayloads::new(client))),
        };
        assert_eq!(fetching.held_bytes(&message), 300_000);
    }
}
