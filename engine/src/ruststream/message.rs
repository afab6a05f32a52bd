//! [`SqsMessage`]: a delivery as the framework sees it, and the wire form of bodies and headers.

use std::sync::Arc;
use std::time::Duration;

use ::ruststream::codec::CodecError;
use ::ruststream::{AckError, Bytes, HeaderMap, IncomingMessage};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use tracing::{Instrument, warn};

use super::connection::Core;
use super::harness::Held;
use super::{PARTITION_KEY_HEADER, RECEIVE_COUNT_HEADER};
use crate::attribute::AttributeValue;
use crate::handle::message_span::message_span;
use crate::handle::outcome::Outcome;
use crate::limits::valid_text;
use crate::receive::delivery::{Delivery, Ticket};

/// The message attribute that marks a body sent as base64, because it was not text SQS
/// accepts. Its value is `base64`. The name is the one `ruststream-sqs-sns` uses, so messages
/// in flight during a migration decode on either side.
pub(crate) const BODY_ENCODING_ATTRIBUTE: &str = "ruststream-payload-encoding";

/// The body to send for `payload`, and whether it went base64.
pub(crate) fn encode_body(payload: Vec<u8>) -> (String, bool) {
    match String::from_utf8(payload) {
        Ok(text) if valid_text(&text) => (text, false),
        Ok(text) => (BASE64.encode(text.as_bytes()), true),
        Err(error) => (BASE64.encode(error.as_bytes()), true),
    }
}

/// One received message, to settle with `ack`, `nack` or `nack_after`.
///
/// Its headers are the message attributes (a `String` or `Number` attribute as its text, a
/// `Binary` one as its bytes), plus [`RECEIVE_COUNT_HEADER`] and, from a FIFO queue, the
/// message group as [`PARTITION_KEY_HEADER`]. Settling queues the call with
/// the engine's coalescer, shared with the other deliveries of the queue. The future resolves
/// once the settlement is queued, so that the handler's worker moves on while the call is under
/// way: a settlement SQS then refuses is logged with the message id and counted in
/// `sqs_engine_settlements_total` (failed), and the message comes back when its visibility
/// lapses. On a FIFO queue the next message of the group is handed out only once SQS has
/// confirmed the settlement (a refused one holds the group back until the message is visible
/// again), so the group's order never rests on the worker waiting. With
/// [`SqsBroker::confirm_settlements`](super::SqsBroker::confirm_settlements) the future resolves
/// when SQS has answered, with the answer.
///
/// It carries a span from its receive until its settlement is queued (or answered, where the
/// settlement waits for the answer), with the fields of the native API's message span:
/// OpenTelemetry's messaging fields and the message's trace context.
///
/// Dropped unsettled, it makes no call: the heartbeat stops, and the message comes back when
/// its visibility timeout lapses.
pub struct SqsMessage {
    ticket: Ticket,
    payload: Vec<u8>,
    headers: HeaderMap,
    /// Why the broker could not read the body, when it could not.
    decode_error: Option<CodecError>,
    /// The delivery's span, as the native API's message span.
    span: tracing::Span,
    /// Whether a settlement resolves with SQS's answer rather than once it is queued.
    confirm: bool,
    /// In process, the harness's count of this delivery, released once it is done with.
    counted: Option<Held>,
}

impl std::fmt::Debug for SqsMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsMessage")
            .field("ticket", &self.ticket)
            .field("payload_len", &self.payload.len())
            .finish_non_exhaustive()
    }
}

impl SqsMessage {
    pub(crate) fn new(delivery: Delivery, core: &Core) -> Self {
        let queue = Arc::clone(&delivery.queue().name);
        let span = message_span(&queue, delivery.message());
        let (message, ticket) = delivery.into_parts();
        let (payload, mut headers, corrupt) = read(
            message.body(),
            message.message_attributes().iter(),
            message.message_attributes().len() + 2,
            message.attribute("MessageGroupId"),
        );
        // A body marked base64 that is not: the broker reports it, so that the runtime settles
        // it by the decode policy without handing it to a codec; the warning names the message.
        let decode_error = corrupt.then(|| {
            let _entered = span.enter();
            warn!(
                queue = &*queue,
                message_id = message.id(),
                "the body is marked base64 ({BODY_ENCODING_ATTRIBUTE}) but is not base64"
            );
            CodecError::Decode(
                format!(
                    "message {} on queue {queue}: the body is marked base64 but is not base64",
                    message.id()
                )
                .into(),
            )
        });
        headers.insert(
            RECEIVE_COUNT_HEADER,
            Bytes::from(message.receive_count().to_string().into_bytes()),
        );
        let confirm = core.confirms_settlements();
        // Only the test harness's in-process SQS counts deliveries.
        let counted = core
            .harness
            .as_ref()
            .and_then(|harness| harness.claim(ticket.message_id(), ticket.receive_count()));
        Self {
            ticket,
            payload,
            headers,
            decode_error,
            span,
            confirm,
            counted,
        }
    }

    /// The message id SQS assigned at send.
    pub fn message_id(&self) -> &str {
        self.ticket.message_id()
    }

    /// Queues the settlement now, and returns what the framework awaits: nothing more (the
    /// flusher logs and counts SQS's answer), or SQS's answer where the settlement is
    /// confirmed.
    fn settle(self, outcome: Outcome) -> impl Future<Output = Result<(), AckError>> + Send {
        // In process, the delivery counts until SQS answered its settlement (the settlement is
        // confirmed there).
        let counted = self.counted;
        // The delivery holds its queue's settlement open, so the entry is sent even while the
        // broker shuts down.
        let answer = {
            // What the engine logs as it queues the entry (a redrive, a shortened delay) is
            // logged in the message's span.
            let _entered = self.span.enter();
            if self.confirm {
                Answer::Awaited(self.ticket.settle(outcome))
            } else {
                // On a FIFO queue too: the engine hands out the group's next message only once
                // SQS has answered this one's settlement, whether or not the worker waits.
                self.ticket.settle_detached(outcome);
                Answer::Queued
            }
        };
        async move {
            let _counted = counted;
            match answer {
                Answer::Queued => Ok(()),
                // The framework's contract: an ack SQS answered with success succeeds. A late
                // one is logged with its message id and counted
                // (`sqs_engine_late_settlements_total`) on the way here.
                Answer::Awaited(settlement) => match settlement.await {
                    Ok(()) | Err(crate::SettleError::Unconfirmed { .. }) => Ok(()),
                    Err(error) => Err(AckError::Broker(Box::new(error))),
                },
            }
        }
        .instrument(self.span)
    }
}

/// What a settlement call hands the framework to await.
enum Answer {
    /// Queued for its batch call; SQS's answer is logged and counted by the flusher.
    Queued,
    /// Queued, and its answer awaited.
    Awaited(crate::Settlement),
}

impl IncomingMessage for SqsMessage {
    fn payload(&self) -> &[u8] {
        &self.payload
    }

    fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// A body marked base64 that is not base64: reported here, and warned about with the queue
    /// and the message id, so the runtime settles it by the decode policy.
    fn decode_error(&self) -> Option<&CodecError> {
        self.decode_error.as_ref()
    }

    /// [`PARTITION_KEY_HEADER`]: the FIFO message group, or on a standard queue the header
    /// as it was published.
    fn partition_key(&self) -> Option<&[u8]> {
        self.headers.get(PARTITION_KEY_HEADER)
    }

    /// `ApproximateReceiveCount`: the first delivery is 1, and every receive counts, a lapsed
    /// visibility timeout included.
    fn redelivery_count(&self) -> Option<u64> {
        Some(u64::from(self.ticket.receive_count()))
    }

    /// Deletes the message (`DeleteMessageBatch`, shared with other settlements). It resolves
    /// once the delete is queued, unless settlements are confirmed (see [`SqsMessage`]).
    ///
    /// A delete SQS answered with success after the message's visibility deadline succeeds
    /// here too where the settlement is confirmed, as the framework's conformance contract
    /// requires, but is logged with the message id and counted in
    /// `sqs_engine_late_settlements_total`: SQS answers a delete by an outdated receipt handle
    /// with success and deletes nothing, so the message may come back. The native
    /// [`Settlement`](crate::Settlement) reports it as
    /// [`SettleError::Unconfirmed`](crate::SettleError::Unconfirmed).
    fn ack(self) -> impl Future<Output = Result<(), AckError>> + Send {
        self.settle(Outcome::Ack)
    }

    /// `requeue`: visibility 0, the message comes back at once. Otherwise deletes it, except
    /// on the last receive the declared redrive policy allows, where it is returned so that
    /// SQS moves it to the dead-letter queue.
    fn nack(self, requeue: bool) -> impl Future<Output = Result<(), AckError>> + Send {
        self.settle(if requeue {
            Outcome::Retry
        } else {
            Outcome::Drop
        })
    }

    fn supports_nack_after(&self) -> bool {
        true
    }

    /// Visibility `delay`, in whole seconds rounded up, shortened to end within 12 hours of
    /// the receive: the same message comes back after it.
    fn nack_after(self, delay: Duration) -> impl Future<Output = Result<(), AckError>> + Send {
        self.settle(Outcome::RetryAfter(delay))
    }
}

/// The payload and headers of a body, its message attributes and its FIFO group: a body marked
/// base64 is decoded (one that says it is base64 but is not is handed on as it came), the
/// marker is not a header, and the group is [`PARTITION_KEY_HEADER`].
#[cfg(feature = "testing")]
pub(crate) fn decode<'a>(
    body: &str,
    attributes: impl Iterator<Item = (&'a String, &'a crate::MessageAttribute)>,
    capacity: usize,
    group: Option<&str>,
) -> (Vec<u8>, HeaderMap) {
    let (payload, headers, _) = read(body, attributes, capacity, group);
    (payload, headers)
}

/// The payload and headers as `decode` gives them, and whether a body marked base64 failed to
/// decode as base64 (it is then handed on as it came).
fn read<'a>(
    body: &str,
    attributes: impl Iterator<Item = (&'a String, &'a crate::MessageAttribute)>,
    capacity: usize,
    group: Option<&str>,
) -> (Vec<u8>, HeaderMap, bool) {
    let mut headers = HeaderMap::with_capacity(capacity);
    let mut base64 = false;
    for (name, attribute) in attributes {
        if name == BODY_ENCODING_ATTRIBUTE {
            base64 = attribute.as_str() == Some("base64");
            continue;
        }
        let value = match &attribute.value {
            AttributeValue::String(text) => Bytes::from(text.clone().into_bytes()),
            AttributeValue::Binary(bytes) => Bytes::from(bytes.clone()),
        };
        headers.insert(name.clone(), value);
    }
    if let Some(group) = group {
        headers.insert(
            PARTITION_KEY_HEADER,
            Bytes::from(group.to_owned().into_bytes()),
        );
    }
    if base64 {
        match BASE64.decode(body.as_bytes()) {
            Ok(payload) => (payload, headers, false),
            Err(_) => (body.as_bytes().to_vec(), headers, true),
        }
    } else {
        (body.as_bytes().to_vec(), headers, false)
    }
}

/// A header as a message attribute: a `String` one when its value is text SQS takes, else a
/// `Binary` one. Its name and value are checked with the rest of the message (by
/// `OutgoingMessage::into_entry`).
pub(crate) fn attribute_of(name: &str, value: &[u8]) -> (String, crate::MessageAttribute) {
    let attribute = match std::str::from_utf8(value) {
        Ok(text) if valid_text(text) => crate::MessageAttribute {
            data_type: "String".into(),
            value: AttributeValue::String(text.to_owned()),
        },
        _ => crate::MessageAttribute {
            data_type: "Binary".into(),
            value: AttributeValue::Binary(value.to_vec()),
        },
    };
    (name.to_owned(), attribute)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_sqs_refuses_goes_base64() {
        assert_eq!(
            encode_body(b"{\"id\":1}\n".to_vec()),
            ("{\"id\":1}\n".into(), false)
        );
        let (body, base64) = encode_body(vec![0xff, 0x00, 0x01]);
        assert!(base64);
        assert_eq!(BASE64.decode(body).expect("base64"), vec![0xff, 0x00, 0x01]);
        assert!(encode_body("a\u{1}b".as_bytes().to_vec()).1);
        assert!(encode_body("\u{FFFE}".as_bytes().to_vec()).1);
        assert!(!encode_body("tab\tok ünïcode".as_bytes().to_vec()).1);
    }

    #[test]
    fn a_header_of_text_is_a_string_attribute_and_of_other_bytes_a_binary_one() {
        let (name, text) = attribute_of("traceparent", b"00-ab");
        assert_eq!(
            (name.as_str(), text.as_str()),
            ("traceparent", Some("00-ab"))
        );
        let (_, binary) = attribute_of("bin", &[0xff, 0x00]);
        assert_eq!(binary.data_type, "Binary");
    }

    /// On a paused clock, on the in-process SQS: an ack answered after the message's
    /// visibility lapsed (SQS may have handed it out again, and then deletes nothing) succeeds,
    /// as the framework requires; `settle::tests` shows it counted late.
    #[tokio::test(start_paused = true)]
    async fn an_ack_answered_after_the_visibility_lapsed_succeeds_and_is_counted_late() {
        use ::ruststream::{Broker, ConnectedBroker};

        let sqs = crate::testing::InProcessSqs::new();
        sqs.send("orders", "one").expect("sent");
        let connected = super::super::SqsBroker::new()
            .api(sqs.clone())
            .connect()
            .await
            .expect("connect");
        let mut subscriber = connected
            .subscribe_queue(
                super::super::SqsQueue::new("orders")
                    .visibility(Duration::from_secs(2))
                    .heartbeat(false),
            )
            .await
            .expect("subscribe");
        let delivery = next_delivery(&mut subscriber).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        delivery.ack().await.expect(
            "a late ack succeeds: the framework's contract (the settlement counts it late)",
        );
        drop(subscriber);
        connected.shutdown().await.expect("shutdown");
    }

    use ::ruststream::ConnectedBroker as _;

    /// The next delivery of `subscriber`, which must come and decode.
    async fn next_delivery(subscriber: &mut super::super::SqsSubscriber) -> SqsMessage {
        use ::ruststream::Subscriber;
        use futures::StreamExt;

        let mut stream = Box::pin(subscriber.stream());
        stream
            .next()
            .await
            .expect("a delivery")
            .expect("it decodes")
    }

    /// How long the stand-in takes to answer each batch call in the tests below.
    const ANSWER_AFTER: Duration = Duration::from_secs(5);

    /// The first delivery of `queue`, on a broker over `sqs` (`confirm`: with
    /// `confirm_settlements`), with its connection and subscription.
    async fn first_delivery(
        sqs: Arc<crate::stand_in::StandIn>,
        queue: &str,
        confirm: bool,
    ) -> (
        super::super::ConnectedSqsBroker,
        super::super::SqsSubscriber,
        SqsMessage,
    ) {
        use ::ruststream::Broker;

        let mut broker = super::super::SqsBroker::new().api(sqs);
        if confirm {
            broker = broker.confirm_settlements();
        }
        let connected = broker.connect().await.expect("connect");
        let mut subscriber = connected
            .subscribe_queue(super::super::SqsQueue::new(queue).heartbeat(false))
            .await
            .expect("subscribe");
        let delivery = next_delivery(&mut subscriber).await;
        (connected, subscriber, delivery)
    }

    /// On a paused clock, on the stand-in SQS, whose answers take 5 s and refuse the delete of
    /// `m1`: on a standard queue the ack resolves as soon as the delete is queued, without the
    /// round trip; SQS's refusal then comes through the consumer's count of failed acks (and
    /// the log: `tests/ruststream_settlement_log.rs`).
    #[tokio::test(start_paused = true)]
    async fn on_a_standard_queue_an_ack_resolves_once_queued_and_a_refusal_is_counted() {
        let sqs = crate::stand_in::StandIn::receiving_and_refusing(
            vec![(Duration::ZERO, Ok(vec![crate::stand_in::message("m1")]))],
            "m1",
            ANSWER_AFTER,
        );
        let (connected, subscriber, delivery) = first_delivery(sqs.clone(), "orders", false).await;
        let started = tokio::time::Instant::now();
        delivery
            .ack()
            .await
            .expect("the ack is queued: SQS's refusal is not the framework's to see");
        assert!(
            started.elapsed() < ANSWER_AFTER,
            "the ack resolved without waiting for SQS's answer, after {:?}",
            started.elapsed()
        );
        tokio::time::sleep(ANSWER_AFTER * 2).await;
        assert_eq!(sqs.calls(), [["m1-receipt"]], "the delete was sent");
        let acked: Vec<_> = connected
            .core
            .consumer_stats()
            .iter()
            .map(|stats| stats.acked)
            .collect();
        assert_eq!(acked.len(), 1);
        assert_eq!(
            (acked[0].ok, acked[0].failed),
            (0, 1),
            "the refused ack is counted"
        );
        drop(subscriber);
        connected.shutdown().await.expect("shutdown");
    }

    /// On a paused clock, on the stand-in SQS as above: with `confirm_settlements` the ack
    /// resolves with SQS's answer, its refusal included.
    #[tokio::test(start_paused = true)]
    async fn with_confirm_settlements_an_ack_resolves_with_sqs_answer() {
        let sqs = crate::stand_in::StandIn::receiving_and_refusing(
            vec![(Duration::ZERO, Ok(vec![crate::stand_in::message("m1")]))],
            "m1",
            ANSWER_AFTER,
        );
        let (connected, subscriber, delivery) = first_delivery(sqs, "orders", true).await;
        let started = tokio::time::Instant::now();
        let refused = delivery.ack().await.expect_err("SQS refused the delete");
        assert!(
            started.elapsed() >= ANSWER_AFTER,
            "the ack waited for SQS's answer, resolved after {:?}",
            started.elapsed()
        );
        assert!(
            matches!(&refused, AckError::Broker(error) if error.to_string().contains("m1")),
            "{refused:?}"
        );
        drop(subscriber);
        connected.shutdown().await.expect("shutdown");
    }

    /// On a paused clock, on the stand-in SQS, whose answers take 5 s: on a FIFO queue the ack
    /// resolves once queued, and the next message of the group is handed out only once SQS
    /// has answered the delete: the group's order rests on SQS's answer, not on the worker.
    #[tokio::test(start_paused = true)]
    async fn on_a_fifo_queue_the_next_message_of_the_group_waits_for_sqs_answer() {
        let in_group = |id: &str, sequence: &str| {
            let mut message = crate::stand_in::message(id);
            message
                .attributes
                .insert("MessageGroupId".to_owned(), "g".to_owned());
            message
                .attributes
                .insert("SequenceNumber".to_owned(), sequence.to_owned());
            message
        };
        let sqs = crate::stand_in::StandIn::receiving_and_refusing(
            vec![(
                Duration::ZERO,
                Ok(vec![in_group("m1", "1"), in_group("m2", "2")]),
            )],
            "none",
            ANSWER_AFTER,
        );
        let (connected, mut subscriber, first) = first_delivery(sqs, "orders.fifo", false).await;
        assert_eq!(first.message_id(), "m1");
        let started = tokio::time::Instant::now();
        first.ack().await.expect("queued");
        assert!(
            started.elapsed() < ANSWER_AFTER,
            "the ack resolved without waiting for SQS's answer, after {:?}",
            started.elapsed()
        );
        let second = next_delivery(&mut subscriber).await;
        assert_eq!(second.message_id(), "m2");
        assert!(
            started.elapsed() >= ANSWER_AFTER,
            "the group's next message waited for SQS's answer, came after {:?}",
            started.elapsed()
        );
        second.ack().await.expect("queued");
        drop(subscriber);
        connected.shutdown().await.expect("shutdown");
    }
}
