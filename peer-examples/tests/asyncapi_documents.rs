//! The AsyncAPI document of one service is the same on sqs-engine's broker and on
//! ruststream-sqs-sns's: the server, every channel with its `sqs` or `sns` binding, the
//! operations and the messages.

use ruststream::asyncapi::build_spec;
use serde_json::Value;

mod on_peer {
    use ruststream_sqs_sns::prelude::*;
    use serde::{Deserialize, Serialize};

    include!("common/service.rs");
}

mod on_engine {
    use serde::{Deserialize, Serialize};
    use sqs_engine::prelude::*;

    include!("common/service.rs");
}

fn peer_document(broker: ruststream_sqs_sns::SqsBroker) -> Value {
    let json = build_spec(&on_peer::service(broker))
        .to_json()
        .expect("the document serializes");
    serde_json::from_str(&json).expect("JSON")
}

fn engine_document(broker: sqs_engine::ruststream::SqsBroker) -> Value {
    let json = build_spec(&on_engine::service(broker))
        .to_json()
        .expect("the document serializes");
    serde_json::from_str(&json).expect("JSON")
}

/// Asserts the two documents are equal, naming the first top-level part that differs.
fn assert_same(engine: &Value, peer: &Value) {
    for part in ["servers", "channels", "operations", "components", "info"] {
        assert_eq!(
            engine[part], peer[part],
            "`{part}` differs:\nsqs-engine: {}\nruststream-sqs-sns: {}",
            engine[part], peer[part]
        );
    }
    assert_eq!(engine, peer);
}

#[test]
fn a_service_on_an_endpoint_is_described_alike() {
    let engine = engine_document(
        sqs_engine::ruststream::SqsBroker::new()
            .endpoint("https://sqs.eu-west-1.amazonaws.com")
            .region("eu-west-1"),
    );
    let peer = peer_document(
        ruststream_sqs_sns::SqsBroker::new()
            .endpoint("https://sqs.eu-west-1.amazonaws.com")
            .region("eu-west-1"),
    );
    assert_same(&engine, &peer);
    // Not two empty documents: the parts compared are there.
    assert_eq!(
        engine["servers"]["sqs"]["host"],
        "sqs.eu-west-1.amazonaws.com"
    );
    assert_eq!(
        engine["channels"]["payment-events.fifo"]["bindings"]["sns"]["ordering"]["type"],
        "FIFO"
    );
    assert_eq!(
        engine["channels"]["orders"]["bindings"]["sqs"]["queue"]["visibilityTimeout"],
        30
    );
}

#[test]
fn a_service_by_region_or_by_nothing_is_described_alike() {
    for region in ["us-east-1", "cn-north-1"] {
        let engine = engine_document(sqs_engine::ruststream::SqsBroker::new().region(region));
        let peer = peer_document(ruststream_sqs_sns::SqsBroker::new().region(region));
        assert_same(&engine, &peer);
    }
    assert_same(
        &engine_document(sqs_engine::ruststream::SqsBroker::new()),
        &peer_document(ruststream_sqs_sns::SqsBroker::new()),
    );
}
