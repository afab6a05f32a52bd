//! Publishing: a body over the threshold stored in S3, and sent as a pointer.

use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::primitives::ByteStream;

use super::config::LargePayloads;
use super::pointer::{self, S3Location};
use crate::api::SendEntry;
use crate::limits::MAX_MESSAGE_ATTRIBUTES;

impl LargePayloads {
    /// Whether a message of `bytes` (as SQS counts them) is stored in S3.
    pub(crate) fn stores(&self, bytes: usize) -> bool {
        bytes > self.threshold
    }

    /// Stores `entry`'s body in the bucket under a new random key, and puts the pointer and
    /// the marking attribute in its place.
    ///
    /// # Errors
    ///
    /// Why the body could not be stored, for the publish's error: no bucket was given, the
    /// message has no room for the marking attribute, or `PutObject` failed.
    pub(crate) async fn store(&self, entry: &mut SendEntry) -> Result<(), String> {
        let bucket = self
            .bucket
            .as_ref()
            .ok_or("the message goes through S3 but no bucket is set (LargePayloads::bucket)")?;
        if entry.attributes.len() >= MAX_MESSAGE_ATTRIBUTES {
            return Err(format!(
                "the message goes through S3, whose marking attribute leaves room for {} message attributes, not {}",
                MAX_MESSAGE_ATTRIBUTES - 1,
                entry.attributes.len()
            ));
        }
        let location = S3Location {
            bucket: bucket.clone(),
            key: random_key(),
        };
        let body = std::mem::take(&mut entry.body);
        let size = body.len();
        if let Err(error) = self
            .client
            .put_object()
            .bucket(&location.bucket)
            .key(&location.key)
            .body(ByteStream::from(body.into_bytes()))
            .send()
            .await
        {
            return Err(format!(
                "storing the body at {location} failed: {}",
                DisplayErrorContext(error)
            ));
        }
        entry.body = pointer::format(&location);
        entry.attributes.push(pointer::marking(size));
        Ok(())
    }
}

/// A new object key: a random version-4 UUID, as the extended client libraries name theirs.
fn random_key() -> String {
    let high = (fastrand::u64(..) & 0xffff_ffff_ffff_0fff) | 0x4000;
    let low = (fastrand::u64(..) & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xffff,
        high & 0xffff,
        low >> 48,
        low & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::random_key;

    #[test]
    fn object_keys_are_version_4_uuids() {
        let key = random_key();
        let parts: Vec<&str> = key.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12],
            "{key}"
        );
        assert!(parts[2].starts_with('4'), "{key}");
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"), "{key}");
        assert_ne!(random_key(), key);
    }
}
