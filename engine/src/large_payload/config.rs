//! The settings of bodies stored in S3.

use crate::limits::MAX_MESSAGE_BYTES;

/// Message bodies stored in S3 and sent as a pointer, in the format of AWS's extended client
/// libraries (Java's `amazon-sqs-java-extended-client-lib`, Python's
/// `amazon-sqs-extended-client`), so that either side may be one of them.
///
/// Receiving, a message marked with the `ExtendedPayloadSize` (or the older
/// `SQSLargePayloadSize`) attribute has its body fetched from S3 before the handler runs: the
/// handler sees the stored body, without the marking attribute. The size the attribute
/// declares counts against [`max_held_bytes`](crate::EngineBuilder::max_held_bytes) from the
/// receive, and the heartbeat keeps the message invisible during the fetch. A body that cannot
/// be read (the object is missing, access is denied, the pointer is malformed, the object is
/// not UTF-8) settles the message by the
/// [`on_handler_error`](crate::EngineBuilder::on_handler_error) policy, with a warning that
/// says why, and never reaches the handler. Once SQS confirms a message's delete, its object
/// is deleted, unless [`keep_objects`](Self::keep_objects); a message that goes to the
/// dead-letter queue keeps it.
///
/// Publishing through the broker's `SqsPublisher`, a message whose body and attributes take
/// more than [`threshold`](Self::threshold) bytes has its body stored in
/// [`bucket`](Self::bucket) under a new random key, and is sent as a pointer.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let config = aws_config::load_from_env().await;
/// let payloads = sqs_engine::LargePayloads::new(aws_sdk_s3::Client::new(&config))
///     .bucket("orders-payloads");
/// let engine = sqs_engine::Engine::builder()
///     .sdk_config(&config)
///     .queue("orders")
///     .large_payloads(payloads)
///     .build()?;
/// # let _ = engine;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct LargePayloads {
    pub(super) client: aws_sdk_s3::Client,
    pub(super) bucket: Option<String>,
    pub(super) threshold: usize,
    pub(super) delete_after_ack: bool,
}

impl LargePayloads {
    /// The extended client libraries' default threshold: 256 KiB, SQS's limit when they were
    /// written.
    pub const DEFAULT_THRESHOLD: usize = 256 * 1024;

    /// Bodies stored in S3 through `client`: resolved when received, and deleted once their
    /// message is deleted. Publishing stores none until a [`bucket`](Self::bucket) is given.
    pub fn new(client: aws_sdk_s3::Client) -> Self {
        Self {
            client,
            bucket: None,
            threshold: Self::DEFAULT_THRESHOLD,
            delete_after_ack: true,
        }
    }

    /// The bucket where publishing stores bodies over the threshold. Receiving reads from the
    /// bucket each pointer names, whatever this is.
    pub fn bucket(mut self, bucket: impl Into<String>) -> Self {
        self.bucket = Some(bucket.into());
        self
    }

    /// Publishing stores a body in S3 when the message (its body and message attributes, as
    /// SQS counts them) takes more than `bytes`. Default: [`DEFAULT_THRESHOLD`](Self::DEFAULT_THRESHOLD), 256 KiB. A
    /// value past SQS's limit (1 MiB) counts as the limit: a message SQS refuses is stored.
    pub fn threshold(mut self, bytes: usize) -> Self {
        self.threshold = bytes.min(MAX_MESSAGE_BYTES);
        self
    }

    /// Publishing stores every body in S3, whatever its size.
    pub fn always(self) -> Self {
        self.threshold(0)
    }

    /// Keeps each object after its message is deleted: for buckets that expire objects by a
    /// lifecycle rule, or bodies that several queues share (a topic's subscribers each get
    /// the same pointer).
    pub fn keep_objects(mut self) -> Self {
        self.delete_after_ack = false;
        self
    }
}
