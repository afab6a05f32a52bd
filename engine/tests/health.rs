//! The engine's health on LocalStack: a queue deleted under a running engine makes it
//! unhealthy at once (`Engine::health`, `/healthz`, `/readyz`), and after `give_up_after` its
//! `run` returns an error instead of retrying forever.
//!
//! Its own test binary: it installs the process-wide Prometheus recorder.

use sqs_engine_test_support as support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqs_engine::{CallErrorKind, Error, Phase};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The status code and body `path` answers on `addr`.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("the exporter listens");
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request sent");
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .await
        .expect("answer read");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("an HTTP status line: {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_queue_makes_the_engine_unhealthy_and_run_return_an_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = listener.local_addr().expect("its address");
    sqs_engine::prometheus::install_on(listener).expect("the exporter installs");
    assert_eq!(
        get(addr, "/readyz").await.0,
        503,
        "not ready before any engine runs"
    );

    let client = client().await;
    let name = unique("health");
    let url = create_queue(&client, &name, 30).await;
    let bodies: Vec<String> = (0..5).map(|i| format!("m{i}")).collect();
    send(&client, &url, &bodies).await;

    let give_up_after = Duration::from_secs(3);
    let engine = builder(&name)
        .await
        .receivers(2)
        .give_up_after(give_up_after)
        .build()
        .expect("valid settings");
    let health = engine.health();
    assert_eq!(health.snapshot().phase, Phase::Starting);
    let handled = Arc::new(AtomicUsize::new(0));
    let running = spawn_engine(engine, counting_acks(&handled));

    eventually(Duration::from_secs(30), "every message handled", || {
        handled.load(Ordering::SeqCst) == bodies.len()
    })
    .await;
    let now = health.snapshot();
    assert!(now.is_ready() && now.since_last_receive.is_some(), "{now}");
    let (status, body) = get(addr, "/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(&format!("queue={name} phase=running status=healthy")),
        "{body}"
    );
    assert_eq!(get(addr, "/healthz").await.0, 200);
    let (status, metrics) = get(addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("sqs_engine_messages_received_total"),
        "{metrics}"
    );

    client
        .delete_queue()
        .queue_url(&url)
        .send()
        .await
        .expect("DeleteQueue");
    eventually(
        Duration::from_secs(30),
        "the engine sees the queue gone",
        || !health.snapshot().is_healthy(),
    )
    .await;
    let now = health.snapshot();
    assert_eq!(
        now.last_failure.as_ref().map(|failure| failure.kind),
        Some(CallErrorKind::QueueNotFound),
        "{now}"
    );
    let (status, body) = get(addr, "/healthz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("status=unhealthy"), "{body}");
    assert_eq!(get(addr, "/readyz").await.0, 503);

    // Receives back off up to 10 s between attempts: the error comes within the time allowed
    // and one backoff of it, without anybody asking the engine to stop.
    let result = tokio::time::timeout(Duration::from_secs(30), running.task)
        .await
        .expect("run returns on its own")
        .expect("the engine task does not panic");
    match result {
        Err(Error::GaveUp {
            queue,
            action,
            failing_for,
            source,
        }) => {
            assert_eq!(queue, name);
            assert_eq!(action, "ReceiveMessage");
            assert!(failing_for >= give_up_after, "{failing_for:?}");
            assert_eq!(source.kind, CallErrorKind::QueueNotFound);
        }
        other => panic!("expected Error::GaveUp, got {other:?}"),
    }
    let end = health.snapshot();
    assert!(end.gave_up && end.phase == Phase::Stopped, "{end}");
}
