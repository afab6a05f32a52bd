//! Scenario 7 of the reliability suite, on the RustStream broker, live against LocalStack: bad
//! input. Bodies that are not UTF-8 (sent base64 with the publisher's marker attribute), a
//! marker on a body that is not base64, text that is not JSON, JSON of the wrong shape, bodies
//! at the largest size the queue accepts, ten message attributes and none at all.
//!
//! A delivery that does not decode is settled by the subscription's decode policy (`drop` by
//! default: deleted) with a warning; the valid ones are handled, each exactly once; the
//! consumer goes on, and the good messages sent after the bad ones are still processed.

use sqs_engine_test_support as support;

use std::collections::HashMap;
use std::future::{Future, ready};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::MessageAttributeValue;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ruststream::testing::{Outcome, TestApp};
use serde::Deserialize;
use sqs_engine::prelude::*;

/// How long the harness waits for a live reaction, and the test for the deliveries.
const SETTLE: Duration = Duration::from_secs(60);

/// SQS's largest message on current SQS: 1 MiB.
const ONE_MIB: usize = 1_048_576;
/// The older limit, which some SQS implementations still enforce: 256 KiB.
const QUARTER_MIB: usize = 262_144;

/// The attribute the broker's publisher adds to a body it sent as base64.
const BASE64_MARKER: &str = "ruststream-payload-encoding";

/// The message the subscription expects.
#[derive(Debug, Deserialize)]
struct Order {
    id: u64,
    #[serde(default)]
    note: String,
}

/// What the handler saw: the order ids, and how many headers and note bytes each carried.
#[derive(Debug, Clone, Default)]
struct Seen(Arc<Mutex<Vec<(u64, usize, usize)>>>);

impl Seen {
    fn all(&self) -> Vec<(u64, usize, usize)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

struct Record(Seen);

impl Handle<Order> for Record {
    fn handle(
        &self,
        order: &Order,
        _outs: &(),
        ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        let headers = ctx.headers().iter().count();
        self.0
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((order.id, headers, order.note.len()));
        ready(Ok(()))
    }
}

/// The process-wide subscriber of this test binary, at INFO, written into memory.
fn capture() -> &'static support::LogCapture {
    support::LogCapture::install(tracing::Level::INFO, support::log_capture::FmtSpan::NONE)
}

fn app(queue: &str, seen: Seen) -> impl App {
    let broker = SqsBroker::new()
        .endpoint(support::endpoint())
        .region("us-east-1")
        .test_credentials();
    let name = queue.to_owned();
    RustStream::new(AppInfo::new("bad-input", "0.1.0")).with_broker(broker, move |b| {
        b.include(
            // Bodies are bytes here: nothing for an AsyncAPI document to describe.
            subscriber(name.clone(), Record(seen))
                .undocumented()
                .build()
                .map_source(move |_| SqsQueue::new(name).wait(Duration::from_secs(1))),
        );
    })
}

fn text(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .expect("an attribute")
}

/// One message to send, and the case it belongs to.
struct Sent {
    case: &'static str,
    good: Option<u64>,
    body: String,
    attributes: Vec<(String, MessageAttributeValue)>,
}

impl Sent {
    fn bad(case: &'static str, body: impl Into<String>) -> Self {
        Self {
            case,
            good: None,
            body: body.into(),
            attributes: Vec::new(),
        }
    }

    fn good(case: &'static str, id: u64, note: &str) -> Self {
        Self {
            case,
            good: Some(id),
            body: format!(r#"{{"id":{id},"note":"{note}"}}"#),
            attributes: Vec::new(),
        }
    }

    fn with(mut self, name: &str, value: MessageAttributeValue) -> Self {
        self.attributes.push((name.to_owned(), value));
        self
    }

    /// The record of it, sent as `message_id`. A body marked base64 is handed on decoded when
    /// it decodes, as it came when it does not.
    fn id(&self, message_id: String) -> Id {
        let marked = self
            .attributes
            .iter()
            .any(|(name, _)| name == BASE64_MARKER);
        let payload = if marked {
            BASE64
                .decode(&self.body)
                .unwrap_or_else(|_| self.body.clone().into_bytes())
        } else {
            self.body.clone().into_bytes()
        };
        Id {
            message_id,
            case: self.case,
            good: self.good,
            payload,
        }
    }

    /// Sends it; the message id, or SQS's refusal.
    async fn send(&self, client: &Client, url: &str) -> Result<String, String> {
        let mut request = client
            .send_message()
            .queue_url(url)
            .message_body(&self.body);
        for (name, value) in &self.attributes {
            request = request.message_attributes(name, value.clone());
        }
        request
            .send()
            .await
            .map(|output| output.message_id.expect("a message id"))
            .map_err(|error| match (error.code(), error.message()) {
                (Some(code), Some(message)) => format!("{code}: {message}"),
                _ => format!("{}", aws_sdk_sqs::error::DisplayErrorContext(error)),
            })
    }
}

/// A message sent: its id, case, order id if it is a good one, and the payload the handler
/// is handed.
struct Id {
    message_id: String,
    case: &'static str,
    good: Option<u64>,
    payload: Vec<u8>,
}

/// A JSON order whose body is exactly `size` bytes.
fn order_of_size(id: u64, size: usize) -> String {
    let empty = format!(r#"{{"id":{id},"note":""}}"#);
    let note = "n".repeat(size - empty.len());
    let body = format!(r#"{{"id":{id},"note":"{note}"}}"#);
    assert_eq!(body.len(), size);
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_settled_by_the_decode_policy_and_the_consumer_goes_on() {
    let capture = capture();
    let client = support::client().await;
    let queue = support::unique("rs-bad-input");
    let url = support::create_queue(&client, &queue, 30).await;

    // The largest body the queue takes: 1 MiB on current SQS; an implementation that still
    // enforces the old limit refuses it, and takes 256 KiB.
    let big_bad = Sent::bad("near the size limit, not JSON", "x".repeat(ONE_MIB));
    let (limit, big_bad_id) = match big_bad.send(&client, &url).await {
        Ok(id) => (ONE_MIB, id),
        Err(refusal) => {
            println!("a body of {ONE_MIB} bytes was refused ({refusal}); using {QUARTER_MIB}");
            let big_bad = Sent::bad("near the size limit, not JSON", "x".repeat(QUARTER_MIB));
            let id = big_bad
                .send(&client, &url)
                .await
                .expect("a body of 256 KiB is taken");
            (QUARTER_MIB, id)
        }
    };
    println!("largest body the queue accepts (of 1 MiB and 256 KiB): {limit} bytes");
    // One byte more: refused, or (an implementation looser than SQS) taken, and then it is
    // one more message that does not decode.
    let over = Sent::bad("over the size limit, not JSON", "y".repeat(limit + 1));
    let over_id = match over.send(&client, &url).await {
        Ok(id) => {
            println!("a body of {} bytes was taken as well", limit + 1);
            Some(over.id(id))
        }
        Err(refusal) => {
            println!("a body of {} bytes was refused: {refusal}", limit + 1);
            None
        }
    };

    let non_utf8: &[u8] = &[0xff, 0xfe, 0x00, 0x80, b'{', 0xc3, 0x28];
    let mut ten_attributes = Sent::good("ten message attributes", 3, "ten");
    for i in 0..8 {
        ten_attributes = ten_attributes.with(&format!("attr-{i}"), text(&format!("value {i}")));
    }
    ten_attributes = ten_attributes
        .with(
            "count",
            MessageAttributeValue::builder()
                .data_type("Number")
                .string_value("42")
                .build()
                .expect("an attribute"),
        )
        .with(
            "raw",
            MessageAttributeValue::builder()
                .data_type("Binary")
                .binary_value(Blob::new(non_utf8.to_vec()))
                .build()
                .expect("an attribute"),
        );

    let marker = || text("base64");
    let mut messages = vec![
        Sent::bad("not UTF-8 (base64 + marker)", BASE64.encode(non_utf8))
            .with(BASE64_MARKER, marker()),
        Sent::bad(
            "not UTF-8 (base64 + marker)",
            BASE64.encode([0x80u8, 0x81, 0x82]),
        )
        .with(BASE64_MARKER, marker()),
        Sent::bad("marker on a body not base64", "%% not base64 %%").with(BASE64_MARKER, marker()),
        Sent::bad("text, not JSON", "hello, this is not JSON"),
        Sent::bad("text, not JSON", "{\"id\": 4, truncated"),
        Sent::bad("JSON, not the expected shape", r#"{"unexpected":true}"#),
        Sent::bad("JSON, not the expected shape", "[1,2,3]"),
        Sent::bad("JSON, not the expected shape", r#"{"id":"seven"}"#),
        Sent {
            case: "near the size limit, valid",
            good: Some(1),
            body: order_of_size(1, limit),
            attributes: Vec::new(),
        },
        ten_attributes,
        Sent::good("no attributes", 2, "none"),
        // The body the publisher would send for bytes that are not UTF-8, its marker missing:
        // read as the text it is, which is not JSON.
        Sent::bad("base64 without its marker", BASE64.encode(non_utf8)),
        // A marker naming an encoding the broker does not know: consumed, and the body handed
        // on as it came.
        Sent::good("marker with an unknown value", 4, "gzip").with(BASE64_MARKER, text("gzip")),
    ];
    let mut ten_bad = Sent::bad("ten attributes, not JSON", "not JSON, ten attributes");
    for a in 0..10 {
        ten_bad = ten_bad.with(&format!("a{a}"), text("v"));
    }
    messages.push(ten_bad);

    let mut ids: Vec<Id> = vec![Id {
        message_id: big_bad_id,
        case: "near the size limit, not JSON",
        good: None,
        payload: "x".repeat(limit).into_bytes(),
    }];
    for sent in &messages {
        let message_id = sent.send(&client, &url).await.unwrap_or_else(|refusal| {
            panic!("SQS refused a message of case `{}`: {refusal}", sent.case)
        });
        ids.push(sent.id(message_id));
    }
    ids.extend(over_id);

    let seen = Seen::default();
    let tb = TestApp::start_live_within(app(&queue, seen.clone()), SETTLE)
        .await
        .expect("the app starts");

    // The bad messages are on the queue first; the good ones follow.
    let bad_count = ids.iter().filter(|id| id.good.is_none()).count();
    let mut wait_ids: Vec<u64> = ids.iter().filter_map(|id| id.good).collect();
    let first = ids.len();
    support::eventually(SETTLE, "the first messages settled", || {
        tb.broker::<SqsBroker>().subscriber(&queue).outcomes().len() >= first
    })
    .await;
    for id in 100..105 {
        let sent = Sent::good("good, after the bad ones", id, "after");
        let message_id = sent.send(&client, &url).await.expect("a good message");
        ids.push(sent.id(message_id));
        wait_ids.push(id);
    }
    let total = ids.len();
    support::eventually(SETTLE, "every message settled", || {
        tb.broker::<SqsBroker>().subscriber(&queue).outcomes().len() >= total
    })
    .await;
    // A second chance for a duplicate to show.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let broker = tb.broker::<SqsBroker>();
    let subscription = broker.subscriber(&queue);
    let outcomes = subscription.outcomes();
    let payloads = subscription.received_raw();
    assert_eq!(
        outcomes.len(),
        total,
        "one settlement a message: {outcomes:?}"
    );
    assert_eq!(payloads.len(), total);
    let decode_failed = outcomes
        .iter()
        .filter(|o| **o == Outcome::DecodeFailed)
        .count();
    let acked = outcomes.iter().filter(|o| **o == Outcome::Ack).count();
    assert_eq!(decode_failed, bad_count, "{outcomes:?}");
    assert_eq!(acked, total - bad_count, "{outcomes:?}");
    assert!(
        outcomes[first..].iter().all(|o| *o == Outcome::Ack),
        "the good messages sent after the bad ones were handled: {outcomes:?}"
    );
    tb.shutdown().await.expect("shutdown");

    // The good ones, each handled exactly once, with what they carried.
    let handled = seen.all();
    let mut times: HashMap<u64, usize> = HashMap::new();
    for (id, _, _) in &handled {
        *times.entry(*id).or_default() += 1;
    }
    for id in &wait_ids {
        assert_eq!(
            times.get(id),
            Some(&1),
            "order {id} handled once: {handled:?}"
        );
    }
    assert_eq!(handled.len(), wait_ids.len(), "{handled:?}");
    let headers_of = |id: u64| {
        handled
            .iter()
            .find(|(seen, _, _)| *seen == id)
            .map(|(_, headers, _)| *headers)
    };
    // The message attributes, plus the receive count.
    assert_eq!(headers_of(3), Some(11), "ten attributes arrive");
    assert_eq!(
        headers_of(2),
        Some(1),
        "no attributes: only the receive count"
    );
    assert_eq!(headers_of(4), Some(1), "the unknown marker is consumed");
    let big_note = handled
        .iter()
        .find(|(id, _, _)| *id == 1)
        .map(|(_, _, note)| *note);
    let empty_order = r#"{"id":1,"note":""}"#.len();
    assert_eq!(
        big_note,
        Some(limit - empty_order),
        "the large order arrives whole"
    );

    // Nothing is left: the decode failures were dropped, that is deleted, and the good ones
    // acknowledged.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = support::counts(&client, &url).await;
        if left == (0, 0) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "messages left on the queue (visible, in flight): {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let again = support::receive_raw(&client, &url, 1, 30).await;
    assert!(again.is_empty(), "nothing comes back: {again:?}");

    // The warnings: one per bad message, naming the queue. The runtime's for a body its codec
    // cannot read (`codec decode failed`), or, for a body marked base64 that is not base64,
    // the runtime's for a delivery the broker reported (`the broker reports ...`), after the
    // broker's own warning naming the queue and the message id.
    let log = capture.text();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|line| {
            line.contains("WARN")
                && (line.contains("codec decode failed")
                    || line.contains("the broker reports the delivery does not decode"))
        })
        .collect();
    assert_eq!(warnings.len(), bad_count, "{log}");
    for line in &warnings {
        assert!(
            line.contains(&format!("subscription={queue} ")),
            "the warning names the queue: {line}"
        );
    }
    println!("a decode-failure warning, as written:\n  {}", warnings[0]);
    let corrupt = ids
        .iter()
        .find(|id| id.case == "marker on a body not base64")
        .expect("the corrupt base64 case was sent");
    let broker_warning = log
        .lines()
        .find(|line| line.contains("WARN") && line.contains("is marked base64"))
        .unwrap_or_else(|| panic!("no broker warning for the corrupt base64 body: {log}"));
    assert!(
        broker_warning.contains(&corrupt.message_id) && broker_warning.contains(&queue),
        "the broker's warning names the message id and the queue: {broker_warning}"
    );
    let named: Vec<&str> = ids
        .iter()
        .filter(|id| {
            id.good.is_none()
                && log
                    .lines()
                    .any(|line| line.contains("WARN") && line.contains(id.message_id.as_str()))
        })
        .map(|id| id.message_id.as_str())
        .collect();
    println!(
        "decode-failure warnings naming the message id: {} of {bad_count} (the runtime's \
         `codec decode failed` warning has the fields subscription, message_type and error, and \
         no message id; the broker names it where it finds the body unreadable itself)",
        named.len(),
    );

    // The table: each message counted by the deliveries of its payload.
    let mut deliveries: HashMap<&[u8], usize> = HashMap::new();
    for payload in &payloads {
        *deliveries.entry(payload.as_ref()).or_default() += 1;
    }
    let mut cases: Vec<&'static str> = Vec::new();
    for id in &ids {
        if !cases.contains(&id.case) {
            cases.push(id.case);
        }
    }
    println!(
        "\n(processed: handled, for a valid message; settled by the decode policy, dropped, for \
         one that does not decode)"
    );
    println!(
        "{:<34} {:>8} {:>10} {:>5} {:>10}",
        "case", "messages", "processed", "lost", "duplicates"
    );
    let (mut all_lost, mut all_duplicates) = (0, 0);
    for case in cases {
        let runs: Vec<usize> = ids
            .iter()
            .filter(|id| id.case == case)
            .map(|id| deliveries.get(id.payload.as_slice()).copied().unwrap_or(0))
            .collect();
        let messages = runs.len();
        let processed = runs.iter().filter(|&&n| n > 0).count();
        let lost = messages - processed;
        let duplicates: usize = runs.iter().map(|&n| n.saturating_sub(1)).sum();
        all_lost += lost;
        all_duplicates += duplicates;
        println!("{case:<34} {messages:>8} {processed:>10} {lost:>5} {duplicates:>10}");
    }
    assert_eq!((all_lost, all_duplicates), (0, 0), "every message once");
}
