//! Credentials stay out of what the engine and its SQS client write: the logs at their most
//! verbose, error paths included, and the engine's debug output.

use sqs_engine_test_support as support;

use std::time::Duration;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use sqs_engine::{Engine, Message, Outcome};
use support::proxy::{Fault, Proxy};
use support::*;

/// The process-wide subscriber of this test binary: every event and span of every target at
/// TRACE (`log` records too), written into memory.
fn capture() -> &'static LogCapture {
    LogCapture::install(tracing::Level::TRACE, log_capture::FmtSpan::FULL)
}

/// A secret access key no log line could contain by chance. LocalStack accepts any.
const SECRET_ACCESS_KEY: &str = "sEcReT/oF+tHe+SeCuRiTy+TeSt/q7Xv2Lw9Rk4Zp1Nd8Hs3Jc6Tb5Mf0Ya";
/// A session token, as temporary credentials carry: a credential too.
const SESSION_TOKEN: &str = "SeSsIoNtOkEnOfTheSecurityTest/Fw6Qy1Ue8Ko3Bm9Vx4Gi7Pr2Ln5Ct0Hz";
const ACCESS_KEY_ID: &str = "AKIASECURITYTEST0001";

async fn secret_sdk_config(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            ACCESS_KEY_ID,
            SECRET_ACCESS_KEY,
            Some(SESSION_TOKEN.to_owned()),
            None,
            "security-test",
        ))
        .load()
        .await
}

/// The engine consumes messages with credentials of its own while the SQS client logs at
/// TRACE, and a proxy makes some calls fail (throttling, 5xx, resets) so the error paths log
/// too: the logs are full of the calls, and hold neither the secret key nor the session token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_never_appear_in_the_most_verbose_logs() {
    let capture = capture();
    let client = client().await;
    let name = unique("security");
    let url = create_queue(&client, &name, 5).await;
    let bodies: Vec<String> = (0..60).map(|i| format!("secure-{i}")).collect();
    send(&client, &url, &bodies).await;

    let proxy = Proxy::start().await;
    proxy.inject(
        None,
        0.3,
        &[
            Fault::Throttling,
            Fault::RequestThrottled,
            Fault::InternalError,
            Fault::ServiceUnavailable,
            Fault::Reset,
        ],
    );
    let engine = Engine::builder()
        .sdk_config(&secret_sdk_config(&proxy.url()).await)
        .queue(&name)
        .receive_batch(5)
        .wait_time(Duration::from_secs(1))
        .build()
        .expect("valid settings");
    let stats = engine.stats();
    // A first delivery is retried, so visibility changes are made (and logged) too.
    let running = spawn_engine(engine, |message: Message| async move {
        if message.receive_count() == 1 && message.body().ends_with('7') {
            Outcome::Retry
        } else {
            Outcome::Ack
        }
    });
    eventually(Duration::from_secs(60), "every message acked", || {
        stats.snapshot().acked.ok >= bodies.len() as u64
    })
    .await;
    let stats = running.shutdown().await;
    assert_eq!(counts(&client, &url).await, (0, 0));
    assert!(proxy.counts().injected() > 0, "some calls failed");

    let logs = capture.text();
    println!(
        "{} bytes of logs, {} lines, {} naming the access key id; {stats:?}",
        logs.len(),
        logs.lines().count(),
        logs.lines().filter(|l| l.contains(ACCESS_KEY_ID)).count()
    );
    if let Ok(path) = std::env::var("SQS_ENGINE_SECURITY_LOG") {
        std::fs::write(path, &logs).expect("the log written");
    }
    // The capture saw the SDK at its most verbose, and the engine's own warnings.
    assert!(!logs.is_empty(), "nothing was logged");
    assert!(
        logs.lines()
            .any(|l| l.contains("TRACE") && l.contains("aws_smithy")),
        "no TRACE line from the SDK's runtime"
    );
    assert!(logs.contains("ReceiveMessage"), "the calls are in the logs");
    // The SDK logged the credentials it signed with (redacted): the capture was close enough
    // to see a secret printed with them.
    assert!(
        logs.lines()
            .any(|l| l.contains(ACCESS_KEY_ID) && l.contains("secret_access_key")),
        "the resolved credentials are not in the logs: not verbose enough to tell"
    );
    assert!(logs.contains("retrying"), "the failures were logged");
    for (what, secret) in [
        ("secret access key", SECRET_ACCESS_KEY),
        ("session token", SESSION_TOKEN),
    ] {
        let leaks: Vec<&str> = logs.lines().filter(|l| l.contains(secret)).collect();
        assert!(
            leaks.is_empty(),
            "the {what} is in {} log lines, the first: {}",
            leaks.len(),
            leaks[0]
        );
        // Percent-encoded, as it would be in a URL or form body.
        let encoded = secret.replace('/', "%2F").replace('+', "%2B");
        assert!(
            !logs.contains(&encoded),
            "the {what}, percent-encoded, is in the logs"
        );
    }
}

/// The engine's builder, its SQS client and its errors print without the secret key or the
/// session token.
#[tokio::test]
async fn debug_output_and_errors_redact_the_credentials() {
    let config = secret_sdk_config(&endpoint()).await;
    let builder = Engine::builder().sdk_config(&config).queue("q");
    let engine = builder.clone().build().expect("valid settings");
    let api = sqs_engine::AwsSqs::from_sdk_config(&config);
    let client = aws_sdk_sqs::Client::new(&config);
    // An error from SQS, as `run` returns it: this queue does not exist.
    let error = Engine::builder()
        .sdk_config(&config)
        .queue(unique("security-missing"))
        .build()
        .expect("valid settings")
        .run(|_message: Message| async { Outcome::Ack }, async {})
        .await
        .expect_err("the queue does not exist");
    let printed = [
        format!("{error}"),
        format!("{error:?}"),
        format!("{config:?}"),
        format!("{builder:?}"),
        format!("{engine:?}"),
        format!("{api:?}"),
        format!("{client:?}"),
        format!("{:#?}", client.config()),
    ];
    for text in printed {
        assert!(!text.is_empty());
        assert!(!text.contains(SECRET_ACCESS_KEY), "secret key in {text}");
        assert!(!text.contains(SESSION_TOKEN), "session token in {text}");
    }
}
