//! Receiving: a pointer's body read from S3, and its object deleted after the message.

use aws_sdk_s3::error::DisplayErrorContext;
use tracing::warn;

use super::config::LargePayloads;
use super::pointer::S3Location;

impl LargePayloads {
    /// The body stored at `location`, as text.
    ///
    /// # Errors
    ///
    /// Why it cannot be read, for the message's warning: `GetObject` failed (the object is
    /// missing, access is denied, S3 did not answer), or the object is not UTF-8.
    pub(crate) async fn fetch(&self, location: &S3Location) -> Result<String, String> {
        let object = self
            .client
            .get_object()
            .bucket(&location.bucket)
            .key(&location.key)
            .send()
            .await
            .map_err(|error| {
                format!(
                    "GetObject {location} failed: {}",
                    DisplayErrorContext(error)
                )
            })?;
        let bytes = object
            .body
            .collect()
            .await
            .map_err(|error| format!("reading {location} failed: {error}"))?
            .into_bytes();
        String::from_utf8(bytes.to_vec())
            .map_err(|_| format!("{location} is not UTF-8 text, as a message body must be"))
    }

    /// What deletes `location`'s object once its message is deleted, unless objects are kept.
    pub(crate) fn deleter(
        &self,
        location: S3Location,
    ) -> Option<impl FnOnce() + Send + Sync + 'static> {
        let client = self.client.clone();
        self.delete_after_ack
            .then_some(move || delete_object(client, location))
    }
}

/// Deletes the object of a message SQS deleted, on the side: a failure leaves the object (a
/// bucket's lifecycle rule may expire it) and is logged.
fn delete_object(client: aws_sdk_s3::Client, location: S3Location) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        warn!(object = %location, "no runtime to delete the message's object on; it stays in S3");
        return;
    };
    runtime.spawn(async move {
        if let Err(error) = client
            .delete_object()
            .bucket(&location.bucket)
            .key(&location.key)
            .send()
            .await
        {
            warn!(object = %location, error = %DisplayErrorContext(error), "deleting the object of a deleted message failed; it stays in S3");
        }
    });
}
