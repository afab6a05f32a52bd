//! Publishing: [`SqsPublish`] (the policy), [`SqsPublisher`] (the live publisher), and the
//! entries they build for the per-destination drivers (see `publishing`) that coalesce
//! publishes into `SendMessageBatch` calls.

use std::sync::{Arc, PoisonError};

use ::ruststream::{OutgoingFor, PairError, PublishPolicy, Publisher, Take};
use tokio::sync::oneshot;

use super::PARTITION_KEY_HEADER;
use super::connection::{ConnectedSqsBroker, Core, SharedConnection};
use super::error::SqsError;
use super::message::{BODY_ENCODING_ATTRIBUTE, attribute_of, encode_body};
use super::queue::{is_fifo, queue_name};
use crate::api::SendEntry;
use crate::attribute::{AttributeValue, MessageAttribute};
use crate::limits::MAX_MESSAGE_BYTES;
use crate::publish::{Answer, OutgoingMessage, PublishError, Target};

/// The group of a FIFO publish that names none.
const DEFAULT_GROUP: &str = "default";

/// Per-publish settings for a FIFO queue. A standard queue has neither: asking for one there
/// is [`SqsError::NotFifo`], never silently ignored.
///
/// ```
/// use sqs_engine::prelude::*;
///
/// let options = SqsPublishOptions::default()
///     .group_id("account-42")
///     .deduplication_id("payment-7");
/// assert_eq!(options.group_id.as_deref(), Some("account-42"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct SqsPublishOptions {
    /// The message group: messages of one group are delivered in order, one at a time.
    /// Default: the policy's group, else `default`.
    pub group_id: Option<String>,
    /// The deduplication id: SQS drops a second send with the same id for five minutes.
    /// Default: a unique id per publish.
    pub deduplication_id: Option<String>,
}

impl SqsPublishOptions {
    /// Sets the message group.
    pub fn group_id(mut self, group: impl Into<String>) -> Self {
        self.group_id = Some(group.into());
        self
    }

    /// Sets the deduplication id.
    pub fn deduplication_id(mut self, id: impl Into<String>) -> Self {
        self.deduplication_id = Some(id.into());
        self
    }
}

/// Per-publish FIFO settings as steps of a publish builder: `entries.message(&entry)
/// .group_id("account-7").publish()`. They fill the call's [`SqsPublishOptions`]; a standard
/// queue refuses them with [`SqsError::NotFifo`].
pub trait SqsPublishSteps: Sized {
    /// The message group of this publish.
    #[must_use]
    fn group_id(self, group: impl Into<String>) -> Self;

    /// The deduplication id of this publish: SQS drops a second send with it for five
    /// minutes.
    #[must_use]
    fn deduplication_id(self, id: impl Into<String>) -> Self;
}

impl<Sink, Body, Enc, Hdrs, Dest> SqsPublishSteps
    for ::ruststream::runtime::PublishBuilder<Sink, Body, Enc, Hdrs, Dest>
where
    Sink: ::ruststream::runtime::PublishSink<Options = SqsPublishOptions>,
{
    fn group_id(mut self, group: impl Into<String>) -> Self {
        self.options_mut()
            .get_or_insert_with(SqsPublishOptions::default)
            .group_id = Some(group.into());
        self
    }

    fn deduplication_id(mut self, id: impl Into<String>) -> Self {
        self.options_mut()
            .get_or_insert_with(SqsPublishOptions::default)
            .deduplication_id = Some(id.into());
        self
    }
}

/// The publish policy of an `Out` slot or a reply: publishes go to the SQS queue the message
/// names, coalesced into `SendMessageBatch` calls. The prelude calls it `Publish`.
///
/// ```
/// use sqs_engine::prelude::*;
///
/// let policy = Publish::default().group_id("ledger");
/// # let _ = policy;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct SqsPublish {
    group_id: Option<String>,
}

impl SqsPublish {
    /// The message group of publishes to FIFO queues that name none themselves.
    pub fn group_id(mut self, group: impl Into<String>) -> Self {
        self.group_id = Some(group.into());
        self
    }
}

impl PublishPolicy<ConnectedSqsBroker> for SqsPublish {
    type Live = SqsPublisher;

    fn pair(
        self,
        connected: &ConnectedSqsBroker,
    ) -> impl Future<Output = Result<SqsPublisher, PairError>> + Send {
        std::future::ready(paired_core(connected).map(|core| SqsPublisher {
            core: Connection::Open(core),
            group_id: self.group_id,
        }))
    }

    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self, channel: &str) -> ::ruststream::asyncapi::Bindings {
        super::bindings::publish_channel_bindings(channel)
    }
}

/// Publishes to SQS queues, by the name each message carries (or a queue URL).
///
/// Publishes to one destination are coalesced into `SendMessageBatch` calls: a batch goes out
/// when ten are waiting, when the oldest has waited a few milliseconds, or at once when no call
/// is in flight for the destination. Each publish resolves with its own entry's result.
///
/// A body that is not text SQS takes goes base64, marked with a message attribute that the
/// receiving side decodes. Headers become message attributes; more than ten, or an empty
/// value, refuse the publish with an error instead of losing a header.
#[derive(Clone)]
pub struct SqsPublisher {
    core: Connection,
    group_id: Option<String>,
}

/// The connection a publisher sends through.
#[derive(Clone)]
enum Connection {
    /// A connected broker's.
    Open(Arc<Core>),
    /// Whichever connection the broker it was made from holds when it publishes
    /// ([`SqsBroker::publisher`](super::SqsBroker::publisher)).
    OfBroker(SharedConnection),
}

impl std::fmt::Debug for SqsPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsPublisher")
            .field("group_id", &self.group_id)
            .finish_non_exhaustive()
    }
}

impl SqsPublisher {
    pub(crate) fn new(core: Arc<Core>) -> Self {
        Self {
            core: Connection::Open(core),
            group_id: None,
        }
    }

    /// A publisher through whichever connection `connection` holds when it publishes.
    pub(crate) fn of_broker(connection: SharedConnection) -> Self {
        Self {
            core: Connection::OfBroker(connection),
            group_id: None,
        }
    }

    /// The connection to publish through: [`SqsError::NotConnected`] when there is none
    /// open.
    fn core(&self) -> Result<Arc<Core>, SqsError> {
        let core = match &self.core {
            Connection::Open(core) => Arc::clone(core),
            Connection::OfBroker(connection) => connection
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .map(|connected| Arc::clone(connected.core()))
                .ok_or(SqsError::NotConnected)?,
        };
        if core.is_closed() {
            return Err(SqsError::NotConnected);
        }
        Ok(core)
    }

    /// Builds the entry and queues it, unless its body goes to S3 first; the receiver answers
    /// once SQS has.
    fn enqueue(
        &self,
        destination: &str,
        payload: Vec<u8>,
        headers: &::ruststream::HeaderMap,
        options: Option<&SqsPublishOptions>,
    ) -> Result<Queued, SqsError> {
        let core = self.core()?;
        #[cfg(feature = "s3")]
        if let Some(payloads) = core.large_payloads.clone() {
            // Any size builds: a message over the threshold is stored, and its pointer is small.
            let (target, entry, bytes) =
                self.entry_of_at_most(destination, payload, headers, options, usize::MAX)?;
            if payloads.stores(bytes) {
                return Ok(Queued::ToStore(super::stored::ToStore {
                    core,
                    payloads,
                    destination: destination.to_owned(),
                    target,
                    entry,
                }));
            }
            return super::stored::enqueue(&core, destination, target, entry).map(Queued::Sent);
        }
        let (target, entry, bytes) = self.entry(destination, payload, headers, options)?;
        core.publisher()
            .publishing()
            .enqueue(destination, Target::Queue(target), entry, bytes)
            .map(Queued::Sent)
            .map_err(SqsError::from)
    }

    /// The queue a message for `destination` goes to, its `SendMessageBatch` entry and its
    /// size, or the refusal of a message SQS would refuse or alter.
    pub(crate) fn entry(
        &self,
        destination: &str,
        payload: Vec<u8>,
        headers: &::ruststream::HeaderMap,
        options: Option<&SqsPublishOptions>,
    ) -> Result<(String, SendEntry, usize), SqsError> {
        self.entry_of_at_most(destination, payload, headers, options, MAX_MESSAGE_BYTES)
    }

    /// As [`entry`](Self::entry), for a message of at most `max_bytes`.
    fn entry_of_at_most(
        &self,
        destination: &str,
        payload: Vec<u8>,
        headers: &::ruststream::HeaderMap,
        options: Option<&SqsPublishOptions>,
        max_bytes: usize,
    ) -> Result<(String, SendEntry, usize), SqsError> {
        let target = queue_name(destination).into_owned();
        let message = OutgoingEntry {
            destination,
            payload,
            headers,
            options,
        };
        let (entry, bytes) = message.build(
            &*self.core()?,
            is_fifo(&target),
            self.group_id.as_deref(),
            max_bytes,
        )?;
        Ok((target, entry, bytes))
    }
}

/// A publish once built: queued for its call, or with a body to store in S3 first.
enum Queued {
    Sent(oneshot::Receiver<Answer>),
    #[cfg(feature = "s3")]
    ToStore(super::stored::ToStore),
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Sent(_) => "Sent",
            #[cfg(feature = "s3")]
            Self::ToStore(_) => "ToStore",
        })
    }
}

/// A message on its way to a queue or a topic, before it becomes a batch entry.
pub(crate) struct OutgoingEntry<'a> {
    /// The destination, as the publish named it.
    pub(crate) destination: &'a str,
    pub(crate) payload: Vec<u8>,
    pub(crate) headers: &'a ::ruststream::HeaderMap,
    pub(crate) options: Option<&'a SqsPublishOptions>,
}

impl OutgoingEntry<'_> {
    /// The batch entry and its size, or the refusal of a message the service would refuse or
    /// alter. `fifo` is the destination's kind; `default_group` is the mount site's group;
    /// `max_bytes` the largest message the destination takes.
    pub(crate) fn build(
        self,
        core: &Core,
        fifo: bool,
        default_group: Option<&str>,
        max_bytes: usize,
    ) -> Result<(SendEntry, usize), SqsError> {
        let Self {
            destination,
            payload,
            headers,
            options,
        } = self;
        let mut attributes = Vec::with_capacity(headers.len() + 1);
        // On a FIFO queue the partition key is a group, not an attribute.
        let mut keyed_group = None;
        for (name, value) in headers.iter() {
            if fifo && name == PARTITION_KEY_HEADER {
                keyed_group = Some(String::from_utf8_lossy(value).into_owned());
                continue;
            }
            if name == BODY_ENCODING_ATTRIBUTE {
                return Err(SqsError::Refused {
                    destination: destination.to_owned(),
                    reason: format!("header `{name}` is reserved"),
                });
            }
            attributes.push(attribute_of(name, value));
        }
        let (body, base64) = encode_body(payload);
        if base64 {
            attributes.push((
                BODY_ENCODING_ATTRIBUTE.to_owned(),
                MessageAttribute {
                    data_type: "String".into(),
                    value: AttributeValue::String("base64".into()),
                },
            ));
        }
        let mut message = OutgoingMessage::with_attributes(body, attributes);
        // The call's group, then the message's partition key, then the mount site's; on a
        // standard queue the call's or the mount site's group is refused as a FIFO setting.
        let group = match options.and_then(|o| o.group_id.clone()) {
            Some(group) => Some(group),
            None if fifo => match keyed_group {
                Some(group) => {
                    crate::publish::check_id(destination, "the partition-key header", &group)
                        .map_err(SqsError::from)?;
                    Some(group)
                }
                None => Some(default_group.unwrap_or(DEFAULT_GROUP).to_owned()),
            },
            None => default_group.map(str::to_owned),
        };
        if let Some(group) = group {
            message = message.group_id(group);
        }
        if let Some(dedup) = options.and_then(|o| o.deduplication_id.clone()) {
            message = message.deduplication_id(dedup);
        }
        Ok(message.into_entry(
            destination,
            fifo,
            || core.next_deduplication_id(),
            max_bytes,
        )?)
    }
}

impl Publisher for SqsPublisher {
    type Payload = Take;
    type Error = SqsError;
    type Options = SqsPublishOptions;

    /// Queues the message for its destination's next `SendMessageBatch` and resolves when SQS
    /// has answered for it.
    ///
    /// # Errors
    ///
    /// [`SqsError::Refused`] or [`SqsError::NotFifo`] for a message SQS would refuse or
    /// alter, before anything is sent; [`SqsError::Publish`] when SQS refused the entry or
    /// could not be reached within the retry budget, or (with
    /// [`large_payloads`](super::SqsBroker::large_payloads)) when its body could not be stored
    /// in S3; [`SqsError::NotConnected`] after the broker shut down.
    ///
    /// # Cancel safety
    ///
    /// The message is queued when this is called, before the future is first polled; dropping
    /// the future does not withdraw it, only its answer is lost. A message whose body goes to
    /// S3 is queued once the body is stored: dropping the future before then sends nothing
    /// (an object already stored stays).
    fn publish(
        &self,
        msg: OutgoingFor<'_, Take>,
        options: Option<&SqsPublishOptions>,
    ) -> impl Future<Output = Result<(), SqsError>> + Send {
        let (name, payload, headers) = msg.into_parts();
        let queued = self.enqueue(name, Vec::from(payload), &headers, options);
        async move {
            #[cfg_attr(
                not(feature = "s3"),
                expect(
                    clippy::infallible_destructuring_match,
                    reason = "a body goes to S3 first only with feature s3"
                )
            )]
            let answer = match queued? {
                Queued::Sent(answer) => answer,
                #[cfg(feature = "s3")]
                Queued::ToStore(to_store) => to_store.store_and_enqueue().await?,
            };
            answered(answer).await
        }
    }
}

/// What a queued publish resolves to: its entry's answer, or [`PublishError::Closed`] when the
/// publisher's drivers went away before answering.
pub(crate) async fn answered(answer: oneshot::Receiver<Answer>) -> Result<(), SqsError> {
    answer
        .await
        .unwrap_or(Err(PublishError::Closed))
        .map_err(SqsError::from)
}

/// The connection a publish policy pairs with: [`SqsError::NotConnected`] once it is closed.
pub(crate) fn paired_core(connected: &ConnectedSqsBroker) -> Result<Arc<Core>, PairError> {
    let core = connected.core();
    if core.is_closed() {
        Err(PairError::new(SqsError::NotConnected))
    } else {
        Ok(Arc::clone(core))
    }
}

#[cfg(test)]
mod tests {
    //! The publisher against a scripted stand-in for SQS: per-entry answers, coalescing, and
    //! what shutdown does. What SQS itself does is proven against LocalStack in `tests/`.

    use std::time::Duration;

    use ::ruststream::{Broker, BytesMut, ConnectedBroker, HeaderMap, OutgoingMessage};

    use super::*;
    use crate::ruststream::SqsBroker;
    use crate::stand_in::StandIn;

    /// Refuses a body that starts with `refuse`; a call takes 20 ms, so that publishes made
    /// meanwhile wait for company.
    fn script() -> Arc<StandIn> {
        StandIn::refusing("refuse", Duration::from_millis(20))
    }

    /// A broker connected over `script`.
    async fn connect(script: &Arc<StandIn>) -> crate::ruststream::ConnectedSqsBroker {
        SqsBroker::new()
            .api(Arc::clone(script))
            .connect()
            .await
            .expect("connect")
    }

    fn message(name: &str, body: &str) -> OutgoingMessage<'static, BytesMut> {
        let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
        OutgoingMessage::produced(name, BytesMut::from(body.as_bytes()))
            .with_headers(HeaderMap::new())
    }

    #[tokio::test(start_paused = true)]
    async fn each_publish_gets_its_own_entrys_answer_and_they_share_calls() {
        let script = script();
        let connected = connect(&script).await;
        let publisher = connected.publisher();
        let bodies = ["one", "refuse two", "three", "four", "five"];
        let answers = futures::future::join_all(
            bodies
                .iter()
                .map(|body| publisher.publish(message("q", body), None)),
        )
        .await;
        assert!(answers[0].is_ok());
        assert!(
            matches!(&answers[1], Err(SqsError::Publish { destination, .. }) if destination == "q"),
            "{:?}",
            answers[1]
        );
        assert!(answers[2..].iter().all(Result::is_ok), "{answers:?}");
        // Queued together, before the driver ran: one call.
        assert_eq!(
            script.calls(),
            [bodies.to_vec()],
            "five publishes, one call"
        );

        // One call in flight: what comes meanwhile waits a few milliseconds for company.
        let first = tokio::spawn({
            let publisher = publisher.clone();
            async move { publisher.publish(message("q", "a"), None).await }
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        let rest = futures::future::join_all(
            ["b", "c"].map(|body| publisher.publish(message("q", body), None)),
        );
        assert!(rest.await.iter().all(Result::is_ok));
        assert!(first.await.expect("no panic").is_ok());
        let sends = script.calls();
        assert_eq!(sends[1..], [vec!["a"], vec!["b", "c"]]);
        connected.shutdown().await.expect("shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_sends_what_waits_and_refuses_what_comes_after() {
        let script = script();
        let connected = connect(&script).await;
        let publisher = connected.publisher();
        // Queued when called: the futures are awaited only after shutdown.
        let first = publisher.publish(message("q", "first"), None);
        let second = publisher.publish(message("q", "second"), None);
        connected.shutdown().await.expect("shutdown");
        assert!(first.await.is_ok());
        assert!(second.await.is_ok());
        let late = publisher.publish(message("q", "late"), None).await;
        assert!(matches!(late, Err(SqsError::NotConnected)), "{late:?}");
        let sent: Vec<String> = script.calls().concat();
        assert_eq!(sent, ["first", "second"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fifo_publish_gets_a_group_and_a_deduplication_id() {
        let script = script();
        let connected = connect(&script).await;
        let publisher = connected.publisher();
        let entry = publisher
            .enqueue("orders.fifo", b"x".to_vec(), &HeaderMap::new(), None)
            .map(|_| ());
        assert!(entry.is_ok());
        // The group defaults, the deduplication id is unique per publish.
        let a = connected.core().next_deduplication_id();
        let b = connected.core().next_deduplication_id();
        assert_ne!(a, b);
        let err = publisher
            .enqueue(
                "orders.fifo",
                b"x".to_vec(),
                &HeaderMap::new(),
                Some(&SqsPublishOptions::default().group_id("has space")),
            )
            .expect_err("a group id SQS refuses");
        assert!(matches!(err, SqsError::Refused { .. }), "{err}");
        connected.shutdown().await.expect("shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn headers_sqs_cannot_carry_are_refused_before_anything_is_sent() {
        let connected = connect(&script()).await;
        let publisher = connected.publisher();
        let refusal = |name: &str, value: &'static [u8]| {
            let mut headers = HeaderMap::new();
            headers.insert(name.to_owned(), value);
            match publisher.entry("orders", b"x".to_vec(), &headers, None) {
                Err(SqsError::Refused { reason, .. }) => reason,
                other => panic!("expected a refusal of `{name}`, got {other:?}"),
            }
        };
        assert!(refusal("empty", b"").contains("`empty`"));
        assert!(refusal("has space", b"v").contains("name SQS refuses"));
        assert!(refusal("AWS.thing", b"v").contains("name SQS refuses"));
        assert!(refusal(BODY_ENCODING_ATTRIBUTE, b"base64").contains("reserved"));
        let mut crowded = HeaderMap::new();
        for n in 0..10 {
            crowded.insert(format!("h{n}"), b"v".as_slice());
        }
        // Ten headers fit; a binary body's base64 marker makes eleven attributes.
        assert!(
            publisher
                .entry("orders", b"x".to_vec(), &crowded, None)
                .is_ok()
        );
        let err = publisher
            .entry("orders", vec![0xff], &crowded, None)
            .expect_err("eleven attributes");
        assert!(
            err.to_string().contains("at most 10 message attributes"),
            "{err}"
        );
        connected.shutdown().await.expect("shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn the_partition_key_is_the_group_after_the_calls_own_and_before_the_mount_sites() {
        let connected = connect(&script()).await;
        let plain = connected.publisher();
        let policy = SqsPublisher {
            core: Connection::Open(Arc::clone(connected.core())),
            group_id: Some("mount".into()),
        };
        let mut keyed = HeaderMap::new();
        keyed.insert(PARTITION_KEY_HEADER, b"user-42".as_slice());
        keyed.insert("trace", b"t-1".as_slice());
        let call = SqsPublishOptions::default().group_id("call");
        let group = |publisher: &SqsPublisher, headers, options| {
            let (_, entry, _) = publisher
                .entry("orders.fifo", b"x".to_vec(), headers, options)
                .expect("taken");
            let names: Vec<String> = entry.attributes.iter().map(|(n, _)| n.clone()).collect();
            (entry.group_id.expect("a FIFO entry has a group"), names)
        };
        // On a FIFO queue the key is the group, and is not also an attribute.
        assert_eq!(
            group(&plain, &keyed, None),
            ("user-42".into(), vec!["trace".into()])
        );
        assert_eq!(group(&policy, &keyed, None).0, "user-42");
        assert_eq!(group(&policy, &keyed, Some(&call)).0, "call");
        let unkeyed = HeaderMap::new();
        assert_eq!(group(&policy, &unkeyed, None).0, "mount");
        assert_eq!(group(&plain, &unkeyed, None).0, DEFAULT_GROUP);

        // On a standard queue it is an attribute like any other, and no group.
        let (_, entry, _) = plain
            .entry("orders", b"x".to_vec(), &keyed, None)
            .expect("taken");
        assert_eq!(entry.group_id, None);
        assert!(
            entry.attributes.iter().any(|(name, attribute)| {
                name == PARTITION_KEY_HEADER && attribute.as_str() == Some("user-42")
            }),
            "{:?}",
            entry.attributes
        );

        // A key SQS would refuse as a group is refused, naming the header.
        let mut spaced = HeaderMap::new();
        spaced.insert(PARTITION_KEY_HEADER, b"user 42".as_slice());
        let err = plain
            .entry("orders.fifo", b"x".to_vec(), &spaced, None)
            .expect_err("a group SQS refuses");
        assert!(err.to_string().contains("partition-key"), "{err}");
        connected.shutdown().await.expect("shutdown");
    }
}
