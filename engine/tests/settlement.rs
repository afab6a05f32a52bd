//! Each outcome does to the message what the settlement contract says, on LocalStack.

use sqs_engine_test_support as support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqs_engine::{Message, Outcome};
use support::*;
use tokio::time::Instant;

/// One delivery as the handler saw it.
#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    receive_count: u32,
    body: String,
}

type Seens = Arc<Mutex<Vec<Seen>>>;

fn record(seen: &Seens, message: &Message) {
    seen.lock().expect("lock").push(Seen {
        at: Instant::now(),
        receive_count: message.receive_count(),
        body: message.body().to_owned(),
    });
}

fn seen_len(seen: &Seens) -> usize {
    seen.lock().expect("lock").len()
}

async fn settles_and_is_gone(outcome: Outcome) {
    let client = client().await;
    let name = unique(outcome.as_str());
    let url = create_queue(&client, &name, 30).await;
    send(&client, &url, &["one".to_owned(), "two".to_owned()]).await;

    let engine = builder(&name).await.build().expect("valid settings");
    let stats = engine.stats();
    let running = spawn_engine(engine, move |_message: Message| async move { outcome });
    eventually(Duration::from_secs(20), "both settled", || {
        stats.snapshot().settled_ok() == 2
    })
    .await;
    let stats = running.shutdown().await;

    assert_eq!(stats.messages_received, 2);
    assert_eq!(stats.delete_entries, 2, "{outcome:?} is a delete");
    assert_eq!(stats.change_message_visibility_batch.total(), 0);
    assert_eq!(
        counts(&client, &url).await,
        (0, 0),
        "nothing left on the queue"
    );
}

#[tokio::test]
async fn ack_deletes_the_message() {
    settles_and_is_gone(Outcome::Ack).await;
}

#[tokio::test]
async fn drop_deletes_the_message() {
    settles_and_is_gone(Outcome::Drop).await;
}

/// What came of a message settled with `first` on its first delivery and acked on the next.
struct Redelivered {
    seen: Vec<Seen>,
    stats: sqs_engine::Stats,
    left: (u64, u64),
}

impl Redelivered {
    /// How long after the first delivery the second came.
    fn back_after(&self) -> Duration {
        self.seen[1].at - self.seen[0].at
    }
}

/// Sends one message, settles its first delivery with `first` and acks the next one, on a
/// queue whose visibility timeout (30 s) is far longer than any delay used here.
async fn redelivered_after(prefix: &str, first: Outcome) -> Redelivered {
    let client = client().await;
    let name = unique(prefix);
    let url = create_queue(&client, &name, 30).await;
    send(&client, &url, &["again".to_owned()]).await;

    let seen: Seens = Arc::default();
    let engine = builder(&name).await.build().expect("valid settings");
    let handler_seen = Arc::clone(&seen);
    let running = spawn_engine(engine, move |message: Message| {
        record(&handler_seen, &message);
        async move {
            if message.receive_count() == 1 {
                first
            } else {
                Outcome::Ack
            }
        }
    });
    eventually(Duration::from_secs(15), "the second delivery", || {
        seen_len(&seen) >= 2
    })
    .await;
    let stats = running.shutdown().await;
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen[0].receive_count, 1);
    assert_eq!(
        seen[1].receive_count, 2,
        "the same message, its receive count one higher"
    );
    assert_eq!(seen[1].body, "again");
    assert_eq!(stats.acked.ok, 1);
    Redelivered {
        seen,
        stats,
        left: counts(&client, &url).await,
    }
}

#[tokio::test]
async fn retry_hands_the_message_out_again_at_once_with_its_receive_count_one_higher() {
    let run = redelivered_after("retry", Outcome::Retry).await;
    // Far less than the 30 s visibility timeout: the retry made it visible at once.
    assert!(
        run.back_after() < Duration::from_secs(5),
        "{:?}",
        run.back_after()
    );
    assert_eq!(run.stats.retried.ok, 1);
    assert_eq!(run.left, (0, 0));
}

#[tokio::test]
async fn retry_after_brings_the_message_back_after_the_delay_and_not_before() {
    let delay = Duration::from_secs(3);
    let run = redelivered_after("retry-after", Outcome::RetryAfter(delay)).await;
    let back_after = run.back_after();
    assert!(
        back_after >= delay,
        "came back after {back_after:?}, before the {delay:?} delay"
    );
    assert!(
        back_after < Duration::from_secs(15),
        "came back after {back_after:?}: the delay, not the 30 s visibility timeout, decides"
    );
    assert_eq!(run.stats.retried_after.ok, 1);
    assert_eq!(run.left, (0, 0));
}

#[tokio::test]
async fn a_fractional_retry_after_rounds_up_so_the_message_never_comes_back_early() {
    let delay = Duration::from_millis(1_200);
    let run = redelivered_after("retry-after-frac", Outcome::RetryAfter(delay)).await;
    let back_after = run.back_after();
    assert!(
        back_after >= delay,
        "came back after {back_after:?}, before the {delay:?} delay"
    );
}

#[tokio::test]
async fn a_delivery_dropped_unsettled_makes_no_call_and_comes_back_when_its_visibility_lapses() {
    let client = client().await;
    let name = unique("unsettled");
    let url = create_queue(&client, &name, 30).await;
    send(&client, &url, &["boom".to_owned()]).await;

    let seen: Seens = Arc::default();
    let engine = builder(&name)
        .await
        .visibility_timeout(Duration::from_secs(3))
        .build()
        .expect("valid settings");
    let stats = engine.stats();
    let handler_seen = Arc::clone(&seen);
    // What the engine had done when the message came back, before it was acked.
    let at_return: Arc<Mutex<Option<sqs_engine::Stats>>> = Arc::default();
    let handler_at_return = Arc::clone(&at_return);
    let running = spawn_engine(engine, move |message: Message| {
        record(&handler_seen, &message);
        if message.receive_count() > 1 {
            *handler_at_return.lock().expect("lock") = Some(stats.snapshot());
        }
        async move {
            if message.receive_count() == 1 {
                panic!("handler failure on the first delivery (expected by the test)");
            }
            Outcome::Ack
        }
    });
    eventually(Duration::from_secs(20), "the second delivery", || {
        seen_len(&seen) >= 2
    })
    .await;
    let stats = running.shutdown().await;
    let before_ack = at_return
        .lock()
        .expect("lock")
        .expect("recorded at the return");

    let seen = seen.lock().expect("lock").clone();
    let back_after = seen[1].at - seen[0].at;
    // Received just before the first handler call; back 3 s after that receive.
    assert!(
        back_after >= Duration::from_millis(2_500),
        "came back after {back_after:?}, before its 3 s visibility lapsed"
    );
    assert_eq!(seen[1].receive_count, 2);
    assert_eq!(before_ack.unsettled, 1);
    assert_eq!(
        before_ack.change_message_visibility_batch.total()
            + before_ack.delete_message_batch.total(),
        0,
        "an unsettled delivery makes no call"
    );
    assert_eq!(stats.acked.ok, 1);
    assert_eq!(counts(&client, &url).await, (0, 0));
}
