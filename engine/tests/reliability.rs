//! The engine under network trouble: outages, throttling and 5xx, resets, latency, and a
//! heartbeat whose extensions are throttled. Each scenario runs against LocalStack through the
//! fault-injecting proxy of `support::proxy`, keeps a ledger of every message id its handler
//! processed, and ends with a table row: sent, processed, lost, duplicates, recovery time and
//! the calls the engine had to retry. Nothing may be lost anywhere.
//!
//! The scenarios take turns (one lock): they measure time and throughput, which two of them
//! at once on the same LocalStack would distort.

use sqs_engine_test_support as support;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sqs::Client;
use sqs_engine::{AwsSqs, CallErrorKind, Engine, EngineBuilder, Message, Outcome, SqsApi, Stats};
use support::ledger::Tally;
use support::proxy::{Fault, Proxy};
use support::*;
use tokio::time::Instant;

/// One scenario at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---------------------------------------------------------------------------------------------
// The ledger: what the handlers processed.

/// Every message id the handlers processed, how often, and when.
#[derive(Default)]
struct Ledger {
    inner: Mutex<LedgerInner>,
}

#[derive(Default)]
struct LedgerInner {
    /// Handler runs that finished with an outcome, per message id.
    processed: HashMap<String, u32>,
    /// Handler runs under way, per message id.
    running: HashMap<String, u32>,
    /// Message ids handed to a handler while another handler still ran for them.
    overlaps: Vec<String>,
    /// When each handler run started.
    starts: Vec<Instant>,
}

/// A handler run in the ledger; the run ends (processed or not) when it is dropped.
struct Run {
    ledger: Arc<Ledger>,
    id: String,
    done: bool,
}

impl Run {
    /// The handler finished with an outcome: the message counts as processed.
    fn done(mut self) {
        self.done = true;
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let mut inner = self.ledger.lock();
        if let Some(running) = inner.running.get_mut(&self.id) {
            *running -= 1;
        }
        if self.done {
            *inner.processed.entry(self.id.clone()).or_default() += 1;
        }
    }
}

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, LedgerInner> {
        self.inner.lock().expect("the ledger lock")
    }

    fn begin(self: &Arc<Self>, message: &Message) -> Run {
        let id = message.id().to_owned();
        let mut inner = self.lock();
        let running = inner.running.entry(id.clone()).or_default();
        *running += 1;
        if *running > 1 {
            inner.overlaps.push(id.clone());
        }
        inner.starts.push(Instant::now());
        Run {
            ledger: Arc::clone(self),
            id,
            done: false,
        }
    }

    fn distinct_processed(&self) -> usize {
        self.lock().processed.len()
    }

    fn runs(&self) -> usize {
        self.lock().starts.len()
    }

    fn first_start(&self) -> Option<Instant> {
        self.lock().starts.iter().min().copied()
    }

    fn last_start(&self) -> Option<Instant> {
        self.lock().starts.iter().max().copied()
    }

    /// The first handler run that started at or after `at`.
    fn first_start_after(&self, at: Instant) -> Option<Instant> {
        self.lock()
            .starts
            .iter()
            .filter(|&&s| s >= at)
            .min()
            .copied()
    }

    /// What became of the messages sent, by the handler runs that finished.
    fn tally(&self, sent: &[String]) -> Tally {
        Tally::of(sent, &self.lock().processed)
    }

    /// Deliveries that started while a handler still ran for the same message.
    fn overlaps(&self) -> usize {
        self.lock().overlaps.len()
    }
}

/// A handler that records each run in `ledger`, works for `work`, and acks.
fn recording_handler(ledger: &Arc<Ledger>, work: Duration) -> impl sqs_engine::Handler {
    let ledger = Arc::clone(ledger);
    move |message: Message| {
        let run = ledger.begin(&message);
        async move {
            if !work.is_zero() {
                tokio::time::sleep(work).await;
            }
            run.done();
            Outcome::Ack
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// Collects every warning logged from now on (installed once for the whole binary).
fn warnings() -> LogCapture {
    LogCapture::install(tracing::Level::WARN, log_capture::FmtSpan::NONE).clone()
}

/// A fresh queue with `messages` messages on it; returns its name, URL and the message ids.
async fn filled_queue(
    client: &Client,
    prefix: &str,
    visibility_secs: u32,
    messages: usize,
) -> (String, String, Vec<String>) {
    let name = unique(prefix);
    let url = create_queue(client, &name, visibility_secs).await;
    let ids = send_ids(client, &url, &bodies(prefix, 0, messages), 8).await;
    (name, url, ids)
}

fn bodies(prefix: &str, from: usize, count: usize) -> Vec<String> {
    (from..from + count)
        .map(|i| format!("{prefix}-{i}"))
        .collect()
}

/// An engine builder for `queue` whose SDK client talks to SQS through `proxy`, with a short
/// long poll so the engine stops quickly.
async fn through(proxy: &Proxy, queue: &str) -> EngineBuilder {
    Engine::builder()
        .sdk_config(&sdk_config_at(&proxy.url()).await)
        .queue(queue)
        .wait_time(Duration::from_secs(1))
}

/// Waits until every message of `sent` was processed and the queue holds nothing, visible or
/// in flight (a message whose settlement failed comes back and is processed again first).
async fn until_done(client: &Client, url: &str, ledger: &Ledger, sent: &[String], limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let tally = ledger.tally(sent);
        if tally.unprocessed == 0 && counts(client, url).await == (0, 0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after {limit:?}: {} of {} messages processed, queue (visible, in flight) = {:?}",
            tally.processed,
            tally.sent,
            counts(client, url).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Failed SQS calls of every action: each one was retried (receives always; settlements and
/// extensions within the retry budget).
fn failed_calls(stats: &Stats) -> u64 {
    [
        stats.receive_message,
        stats.delete_message_batch,
        stats.change_message_visibility_batch,
        stats.get_queue_url,
        stats.get_queue_attributes,
        stats.set_queue_attributes,
        stats.create_queue,
    ]
    .iter()
    .map(|c| c.failed)
    .sum()
}

/// One line of a scenario's closing table.
struct Row {
    scenario: &'static str,
    tally: Tally,
    recovery: Option<Duration>,
    retried: u64,
    wall: Duration,
}

fn print_table(rows: &[Row]) {
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| {:<34} | {:>8} | {:>9} | {:>4} | {:>10} | {:>8} | {:>13} | {:>6} |",
        "scenario",
        "messages",
        "processed",
        "lost",
        "duplicates",
        "recovery",
        "calls retried",
        "wall"
    );
    let _ = writeln!(
        table,
        "|{:-<36}|{:->10}|{:->11}|{:->6}|{:->12}|{:->10}|{:->15}|{:->8}|",
        "", "", "", "", "", "", "", ""
    );
    for row in rows {
        let recovery = row
            .recovery
            .map_or_else(|| "-".to_owned(), |d| format!("{:.2}s", d.as_secs_f64()));
        let _ = writeln!(
            table,
            "| {:<34} | {:>8} | {:>9} | {:>4} | {:>10} | {:>8} | {:>13} | {:>5.1}s |",
            row.scenario,
            row.tally.sent,
            row.tally.processed,
            row.tally.unprocessed,
            row.tally.duplicates,
            recovery,
            row.retried,
            row.wall.as_secs_f64()
        );
    }
    println!("\n{table}");
}

fn assert_nothing_lost(scenario: &str, tally: &Tally) {
    assert_eq!(tally.unprocessed, 0, "{scenario}: messages lost: {tally:?}");
    assert_eq!(
        tally.strangers, 0,
        "{scenario}: processed messages that were never sent: {tally:?}"
    );
}

/// A message handled twice only where the engine counted why: a settlement that failed or
/// came too late.
fn assert_duplicates_counted(scenario: &str, tally: &Tally, stats: &Stats) {
    assert!(
        tally.duplicates <= stats.settled_failed() + stats.late_settlements,
        "{scenario}: {} duplicates, {} failed and {} late settlements",
        tally.duplicates,
        stats.settled_failed(),
        stats.late_settlements
    );
}

/// A scenario of faults injected into a share of every call, whatever the action.
struct Faults {
    /// The scenario's row in the table.
    scenario: &'static str,
    /// The queue name's prefix.
    prefix: &'static str,
    /// The queue's visibility timeout, in seconds.
    visibility_secs: u32,
    messages: usize,
    rate: f64,
    faults: &'static [Fault],
    /// The engine's bound on one call, when not the default.
    call_timeout: Option<Duration>,
    /// Until every message is processed and the queue is empty, at most.
    limit: Duration,
}

/// What a run through [`Faults`] left.
struct FaultRun {
    stats: Stats,
    counts: support::proxy::Counts,
}

impl FaultRun {
    /// The receive and delete calls, each as the engine counted it and as the proxy saw it.
    /// The faults hit both: each had a fault injected.
    fn faulted_receives_and_deletes(
        &self,
    ) -> [(
        &'static str,
        sqs_engine::Count,
        support::proxy::ActionCounts,
    ); 2] {
        [
            ("ReceiveMessage", self.stats.receive_message),
            ("DeleteMessageBatch", self.stats.delete_message_batch),
        ]
        .map(|(action, count)| {
            let proxied = self.counts.action(action);
            assert!(proxied.injected_total() > 0, "{action}: {proxied:?}");
            (action, count, proxied)
        })
    }
}

impl Faults {
    /// Fills a queue, runs the engine `configure` makes (on a builder through the proxy) with
    /// the faults injected until every message is processed, and prints the scenario's row.
    /// Checks that nothing was lost and that every duplicate is counted.
    async fn run(&self, configure: impl FnOnce(EngineBuilder) -> EngineBuilder) -> FaultRun {
        let started = Instant::now();
        let client = client().await;
        let (name, url, sent) =
            filled_queue(&client, self.prefix, self.visibility_secs, self.messages).await;
        let proxy = Proxy::start().await;
        proxy.inject(None, self.rate, self.faults);
        let ledger: Arc<Ledger> = Arc::default();
        let mut builder = through(&proxy, &name).await;
        if let Some(timeout) = self.call_timeout {
            let config = sdk_config_at(&proxy.url()).await;
            builder = builder.api(AwsSqs::from_sdk_config(&config).with_call_timeout(timeout));
        }
        let engine = configure(builder).build().expect("valid settings");
        let running = spawn_engine(engine, recording_handler(&ledger, Duration::ZERO));
        until_done(&client, &url, &ledger, &sent, self.limit).await;
        let stats = running.shutdown().await;
        let tally = ledger.tally(&sent);
        let counts = proxy.counts();
        print_table(&[Row {
            scenario: self.scenario,
            tally,
            recovery: None,
            retried: failed_calls(&stats),
            wall: started.elapsed(),
        }]);
        println!("{}: {stats:?}\nproxy: {counts:?}", self.prefix);
        assert_nothing_lost(self.scenario, &tally);
        assert_duplicates_counted(self.scenario, &tally, &stats);
        FaultRun { stats, counts }
    }
}

// ---------------------------------------------------------------------------------------------
// The proxy's faults are the failures the engine knows.

/// Each fault the proxy injects reaches the engine's SQS client as the failure it imitates:
/// throttling, a server error, a network error. Otherwise the scenarios below would test
/// something else than they claim.
#[tokio::test]
async fn the_proxy_faults_are_seen_as_throttling_server_and_network_errors() {
    let _serial = SERIAL.lock().await;
    let client = client().await;
    let name = unique("proxy-faults");
    let url = create_queue(&client, &name, 5).await;
    let proxy = Proxy::start().await;
    let api = sqs_engine::AwsSqs::from_sdk_config(&sdk_config_at(&proxy.url()).await);
    let request = sqs_engine::ReceiveRequest {
        queue_url: &url,
        max_messages: 1,
        wait_time: Duration::ZERO,
        visibility_timeout: 5,
        attempt_id: None,
        system_attributes: sqs_engine::SystemAttributes::All.names(),
    };

    let cases = [
        (
            Fault::Throttling,
            CallErrorKind::Throttled,
            Some("ThrottlingException"),
        ),
        (
            Fault::RequestThrottled,
            CallErrorKind::Throttled,
            Some("RequestThrottled"),
        ),
        (
            Fault::InternalError,
            CallErrorKind::Server,
            Some("InternalError"),
        ),
        (
            Fault::ServiceUnavailable,
            CallErrorKind::Server,
            Some("ServiceUnavailable"),
        ),
        (Fault::Reset, CallErrorKind::Network, None),
    ];
    for (fault, kind, code) in cases {
        proxy.clear_faults();
        proxy.inject(Some("ReceiveMessage"), 1.0, &[fault]);
        let error = api
            .receive(&request)
            .await
            .expect_err("every receive is answered with the fault");
        assert_eq!(error.kind, kind, "{fault:?}: {error}");
        assert_eq!(error.code.as_deref(), code, "{fault:?}: {error}");
        assert!(error.is_transient(), "{fault:?} is retried: {error}");
    }
    // Other actions are forwarded untouched, and with the rule gone receives are too.
    api.queue_attributes(&url)
        .await
        .expect("GetQueueAttributes is forwarded");
    proxy.clear_faults();
    api.receive(&request).await.expect("forwarded again");

    proxy.outage(Duration::from_secs(1));
    let error = api
        .receive(&request)
        .await
        .expect_err("refused in the outage");
    assert_eq!(error.kind, CallErrorKind::Network, "{error}");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    api.receive(&request).await.expect("back after the outage");

    let counts = proxy.counts();
    let receives = counts.action("ReceiveMessage");
    assert_eq!(receives.injected_total(), 5, "{counts:?}");
    assert_eq!(receives.forwarded, 2, "{counts:?}");
    assert_eq!(counts.action("GetQueueAttributes").forwarded, 1);
    // The open connection was reset when the outage began.
    assert!(counts.killed_connections >= 1, "{counts:?}");
}

/// The seeded draw injects close to the rate asked for, and the same seed and calls inject the
/// same faults.
#[tokio::test]
async fn the_proxy_injects_at_the_rate_asked_for_and_repeatably() {
    let _serial = SERIAL.lock().await;
    let client = client().await;
    let name = unique("proxy-rate");
    let url = create_queue(&client, &name, 5).await;
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        let proxy = Proxy::start_with_seed(42).await;
        proxy.inject(None, 0.25, &Fault::ANSWERED);
        let api = sqs_engine::AwsSqs::from_sdk_config(&sdk_config_at(&proxy.url()).await);
        let mut run = Vec::new();
        for _ in 0..400 {
            run.push(api.queue_attributes(&url).await.err().map(|e| e.kind));
        }
        let counts = proxy.counts().action("GetQueueAttributes");
        let share = counts.injected_total() as f64 / 400.0;
        assert!((0.18..=0.32).contains(&share), "{share} of calls injected");
        assert_eq!(counts.forwarded + counts.injected_total(), 400);
        assert!(
            Fault::ANSWERED
                .iter()
                .all(|f| counts.injected.get(f).copied().unwrap_or(0) > 0),
            "every fault drawn: {counts:?}"
        );
        outcomes.push(run);
    }
    assert_eq!(
        outcomes[0], outcomes[1],
        "the same seed injects the same faults"
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Outage.

/// The proxy refuses every connection for 15 s in the middle of a run. The engine keeps
/// trying, with backoff and not in a tight loop, gets going again by itself when SQS is back,
/// and processes every message, those sent during the outage included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_of_15_s_is_ridden_out_with_backoff_and_nothing_is_lost() {
    let _serial = SERIAL.lock().await;
    const OUTAGE: Duration = Duration::from_secs(15);
    const RECEIVERS: usize = 4;
    const WORKERS: usize = 8;
    const PREFETCH: usize = 40;
    let started = Instant::now();
    let client = client().await;
    let (name, url, mut sent) = filled_queue(&client, "outage", 5, 400).await;
    let proxy = Proxy::start().await;
    let ledger: Arc<Ledger> = Arc::default();
    let engine = through(&proxy, &name)
        .await
        .receivers(RECEIVERS)
        .workers(WORKERS)
        .prefetch(PREFETCH)
        .build()
        .expect("valid settings");
    let stats = engine.stats();
    let running = spawn_engine(
        engine,
        recording_handler(&ledger, Duration::from_millis(20)),
    );

    eventually(Duration::from_secs(30), "a third processed", || {
        ledger.distinct_processed() >= 130
    })
    .await;
    let before = stats.snapshot();
    let outage_start = Instant::now();
    proxy.outage(OUTAGE);
    // Producers go on while the consumer is cut off.
    sent.extend(send_ids(&client, &url, &bodies("outage", 400, 400), 8).await);
    tokio::time::sleep_until(outage_start + OUTAGE).await;
    let outage_end = Instant::now();
    let during = stats.snapshot();
    let proxy_during = proxy.counts();
    assert!(!proxy.in_outage());

    until_done(&client, &url, &ledger, &sent, Duration::from_secs(60)).await;
    let stats = running.shutdown().await;
    let tally = ledger.tally(&sent);
    let recovery = ledger
        .first_start_after(outage_end)
        .map(|first| first - outage_end);
    print_table(&[Row {
        scenario: "outage 15 s",
        tally,
        recovery,
        retried: failed_calls(&stats),
        wall: started.elapsed(),
    }]);
    let receives_in_outage = during.receive_message.total() - before.receive_message.total();
    let attempts_in_outage = proxy_during.refused();
    println!(
        "outage: {receives_in_outage} receive attempts by {RECEIVERS} receivers in {OUTAGE:?}, \
         {attempts_in_outage} connections and calls refused; settlements failed {}, late {}; {stats:?}",
        stats.settled_failed(),
        stats.late_settlements
    );

    assert_nothing_lost("outage", &tally);
    // Every receiver kept trying through the outage...
    assert!(
        receives_in_outage >= RECEIVERS as u64,
        "{receives_in_outage} receive attempts during the outage"
    );
    // None got through (but those answered just before it began and counted just after).
    assert!(
        during.receive_message.ok <= before.receive_message.ok + RECEIVERS as u64,
        "receives got through the outage: {} before, {} at its end",
        before.receive_message.ok,
        during.receive_message.ok
    );
    // ...with backoff. A receiver's retry n waits a uniform draw in 0..=min(10 s, 100 ms *
    // 2^(n-1)): the ceilings of the first seven retries add up to 12.7 s, so a receiver makes
    // about ten attempts in 15 s. 25 attempts would take 24 draws adding up to under 15 s with
    // at least 17 of them from 0..=10 s: below one in a billion. Without backoff, refused
    // connections on localhost come back in well under a millisecond: thousands a second.
    let receive_bound = RECEIVERS as u64 * 25;
    assert!(
        receives_in_outage <= receive_bound,
        "{receives_in_outage} receive attempts during a {OUTAGE:?} outage: a tight retry loop \
         (bound {receive_bound})"
    );
    // What reached the proxy: those receives, plus the settlements of the messages in hand (at
    // most workers + prefetch, each batch at most 8 attempts).
    let attempt_bound = receive_bound + (WORKERS + PREFETCH) as u64 * 8;
    assert!(
        attempts_in_outage <= attempt_bound,
        "{attempts_in_outage} connection attempts during the outage (bound {attempt_bound})"
    );
    // Back by itself within the longest receive backoff (10 s) and a receive.
    let recovery = recovery.expect("messages processed after the outage");
    assert!(
        recovery <= Duration::from_secs(12),
        "the first message after the outage was processed {recovery:?} after it ended"
    );
    // Duplicates are not losses: a settlement that ran out of its retry budget (8 attempts,
    // about 10 s) during the outage leaves its message on the queue, and it comes back when
    // its 5 s visibility lapses, to be processed again. Every duplicate must be explained by a
    // settlement that failed or landed late.
    assert_duplicates_counted("outage", &tally, &stats);
    assert_eq!(
        ledger.overlaps(),
        0,
        "a message was handed out while its handler ran"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Throttling and 5xx.

/// A fifth of every call, of every action, answered with throttling or a 5xx for a whole run
/// of 3,000 messages: every message is processed, every failed call is retried and counted,
/// and the retries stay close to what the failure rate makes necessary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifth_of_the_calls_throttled_or_5xx_loses_nothing_and_retries_are_counted() {
    let _serial = SERIAL.lock().await;
    const MESSAGES: usize = 3_000;
    let FaultRun { stats, counts } = Faults {
        scenario: "20% throttling and 5xx",
        prefix: "throttled",
        visibility_secs: 10,
        messages: MESSAGES,
        rate: 0.2,
        faults: &Fault::ANSWERED,
        call_timeout: None,
        limit: Duration::from_secs(90),
    }
    .run(|engine| engine.receivers(8).workers(32))
    .await;
    // Every fault the proxy injected is a failed call in the engine's counters, and every call
    // it forwarded a successful one.
    for (action, count) in [
        ("ReceiveMessage", stats.receive_message),
        ("DeleteMessageBatch", stats.delete_message_batch),
        (
            "ChangeMessageVisibilityBatch",
            stats.change_message_visibility_batch,
        ),
        ("GetQueueUrl", stats.get_queue_url),
        ("GetQueueAttributes", stats.get_queue_attributes),
    ] {
        let proxied = counts.action(action);
        assert_eq!(
            count.failed,
            proxied.failed(),
            "{action}: {count:?} {proxied:?}"
        );
        // A long poll abandoned at shutdown is in neither the engine's ok nor failed calls.
        assert!(
            proxied.forwarded >= count.ok
                && proxied.forwarded <= count.ok + stats.abandoned_receives,
            "{action}: {count:?} {proxied:?}"
        );
    }
    assert!(stats.receive_message.failed > 0 && stats.delete_message_batch.failed > 0);
    // The faults hit about a fifth of the calls...
    let share = counts.injected() as f64 / (counts.injected() + counts.forwarded()) as f64;
    assert!(
        (0.15..=0.25).contains(&share),
        "{share:.3} of calls injected"
    );
    // ...and the retries stayed near what that rate makes necessary: with a fifth of the
    // attempts failing, 1 / (1 - 0.2) = 1.25 attempts per call that got through.
    for (action, count) in [
        ("ReceiveMessage", stats.receive_message),
        ("DeleteMessageBatch", stats.delete_message_batch),
    ] {
        let attempts_per_call = count.total() as f64 / count.ok as f64;
        println!("throttled: {action}: {attempts_per_call:.3} attempts per successful call");
        assert!(
            attempts_per_call <= 1.5,
            "{action}: {attempts_per_call:.3} attempts per successful call"
        );
    }
    assert!(stats.acked.ok >= MESSAGES as u64);
}

/// A tenth of every call, of every action, has its connection reset without an answer: the
/// engine retries as for any network failure, and loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenth_of_the_connections_reset_loses_nothing() {
    let _serial = SERIAL.lock().await;
    let run = Faults {
        scenario: "10% connections reset",
        prefix: "resets",
        visibility_secs: 5,
        // About 200 receives and 200 delete calls: at a tenth, each action is reset at least
        // once but in about one run of a billion (a thousand messages, about 100 of each, left
        // one run in 40,000 without a reset delete).
        messages: 2_000,
        rate: 0.1,
        faults: &[Fault::Reset],
        call_timeout: None,
        limit: Duration::from_secs(60),
    }
    .run(|engine| engine.receivers(4).workers(32))
    .await;
    for (action, count, proxied) in run.faulted_receives_and_deletes() {
        assert_eq!(
            count.failed,
            proxied.failed(),
            "{action}: {count:?} {proxied:?}"
        );
    }
}

/// A twentieth of every call, of every action, read by the proxy and never answered (the
/// connection stays open and silent): each such call is abandoned after the call timeout and
/// counted as failed, the work is retried, and nothing is lost. Without a bound on a call, the
/// first silent receive would hold its receiver for good, and the run would stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_are_abandoned_after_the_call_timeout_and_nothing_is_lost() {
    let _serial = SERIAL.lock().await;
    let run = Faults {
        scenario: "5% of calls never answered",
        prefix: "silence",
        visibility_secs: 5,
        // About 300 receives and 300 delete calls: at a twentieth, each action is silenced at
        // least once but in about one run of 5 million (a thousand messages, about 100 receives,
        // left one run in 200 without a silenced receive).
        messages: 3_000,
        rate: 0.05,
        faults: &[Fault::Silence],
        call_timeout: Some(Duration::from_secs(1)),
        limit: Duration::from_secs(90),
    }
    .run(|engine| engine.receivers(4).workers(32))
    .await;
    // Every silenced call is a failed call in the engine's counters, but for a long poll
    // abandoned at shutdown, which is counted apart.
    let abandoned = run.stats.abandoned_receives;
    for (action, count, proxied) in run.faulted_receives_and_deletes() {
        assert!(
            count.failed <= proxied.failed() && proxied.failed() <= count.failed + abandoned,
            "{action}: {count:?} {proxied:?}, {abandoned} long polls abandoned"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Slow network.

/// 100 ms added to every call loses nothing, and costs little throughput when enough
/// receivers keep enough receives in flight: a receiver's loop is one round trip per ten
/// messages, so the engine's throughput is receivers * 10 / round trip until SQS (here
/// LocalStack, on the same two CPUs) is the limit. The throughput with the latency is printed
/// as a ratio to the run without, not asserted: a speed in a test depends on the machine, and
/// 3,000 messages at 100 ms are partly the receivers' ramp-up (0.6 to 0.83 of the run without,
/// from run to run, on two cores). The load test's comparison measures throughput at a latency
/// (`loadtest compare --latency 50`).
///
/// Throughput is measured from the first message handled to the last. From the engine's start
/// it also counts the startup, `GetQueueUrl`, `GetQueueAttributes` and a first receive one
/// after the other: three round trips, 0.3 s of latency that no setting can hide, a tenth of a
/// run of a few seconds. Both figures are printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_ms_network_loses_nothing_and_its_throughput_is_reported() {
    let _serial = SERIAL.lock().await;
    const MESSAGES: usize = 3_000;
    const LATENCY: Duration = Duration::from_millis(100);
    let client = client().await;
    let mut rows = Vec::new();
    let mut throughputs = Vec::new();
    for latency in [Duration::ZERO, LATENCY] {
        let started = Instant::now();
        let (name, url, sent) = filled_queue(&client, "latency", 10, MESSAGES).await;
        let proxy = Proxy::start().await;
        proxy.set_latency(latency);
        let ledger: Arc<Ledger> = Arc::default();
        // 48 receivers: 480 messages per round trip, 3,600 a second if a receive takes 130 ms,
        // above what LocalStack manages. 64 batch calls in flight: deletes of 10 keep up at 6,400 a
        // second. Workers bound the unsettled messages (with the prefetch), and with the
        // latency a message stays unsettled for two round trips at least (its receive and
        // its delete), about 0.3 s here: 512 workers leave room for 2,700 a second. With 64
        // the limit was 1,300 a second, whatever the receivers.
        let engine = through(&proxy, &name)
            .await
            .receivers(48)
            .workers(512)
            .max_batches_in_flight(64)
            .build()
            .expect("valid settings");
        let engine_start = Instant::now();
        let running = spawn_engine(engine, recording_handler(&ledger, Duration::ZERO));
        eventually(Duration::from_secs(60), "every message processed", || {
            ledger.distinct_processed() >= MESSAGES
        })
        .await;
        let finished = Instant::now();
        until_done(&client, &url, &ledger, &sent, Duration::from_secs(30)).await;
        let stats = running.shutdown().await;
        let tally = ledger.tally(&sent);
        let first = ledger.first_start().expect("processed");
        let last = ledger.last_start().expect("processed");
        let overall = MESSAGES as f64 / (finished - engine_start).as_secs_f64();
        let steady = MESSAGES as f64 / (last - first).as_secs_f64();
        println!(
            "latency {latency:?}: {overall:.0} msg/s from the engine's start, {steady:.0} msg/s \
             from the first message to the last; {} runs; {stats:?}",
            ledger.runs()
        );
        assert_nothing_lost("latency", &tally);
        throughputs.push((overall, steady));
        rows.push(Row {
            scenario: if latency.is_zero() {
                "no added latency"
            } else {
                "100 ms added to every call"
            },
            tally,
            recovery: None,
            retried: failed_calls(&stats),
            wall: started.elapsed(),
        });
    }
    print_table(&rows);
    let [(overall_fast, steady_fast), (overall_slow, steady_slow)] = throughputs[..] else {
        unreachable!("two runs")
    };
    let ratio = steady_slow / steady_fast;
    println!(
        "throughput with 100 ms latency / without: {steady_slow:.0} / {steady_fast:.0} msg/s = \
         {ratio:.2} (from the engine's start: {overall_slow:.0} / {overall_fast:.0} msg/s = {:.2})",
        overall_slow / overall_fast
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Slow handlers, throttled heartbeat.

/// Handlers that take more than twice the visibility timeout while half the
/// `ChangeMessageVisibilityBatch` calls are throttled: the heartbeat's retries get most
/// extensions through. A message handed out again while its handler still runs is allowed
/// only where an extension finally failed or the settlement landed late: the engine counted
/// it, and logged a warning naming the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_handlers_under_throttled_heartbeats_are_redelivered_only_when_counted() {
    let _serial = SERIAL.lock().await;
    let warnings = warnings();
    const MESSAGES: usize = 60;
    const VISIBILITY: u32 = 4;
    let started = Instant::now();
    let client = client().await;
    let (name, url, sent) =
        filled_queue(&client, "heartbeat-throttled", VISIBILITY, MESSAGES).await;
    let proxy = Proxy::start().await;
    proxy.inject(
        Some("ChangeMessageVisibilityBatch"),
        0.5,
        &[Fault::Throttling, Fault::RequestThrottled],
    );
    let ledger: Arc<Ledger> = Arc::default();
    let engine = through(&proxy, &name)
        .await
        .receivers(4)
        .workers(MESSAGES)
        .build()
        .expect("valid settings");
    let running = spawn_engine(
        engine,
        recording_handler(&ledger, Duration::from_secs(u64::from(VISIBILITY) * 9 / 4)),
    );
    until_done(&client, &url, &ledger, &sent, Duration::from_secs(60)).await;
    let stats = running.shutdown().await;
    let tally = ledger.tally(&sent);
    let overlaps = ledger.overlaps();
    let counts = proxy.counts();
    print_table(&[Row {
        scenario: "slow handlers, 50% CMVB throttled",
        tally,
        recovery: None,
        retried: failed_calls(&stats),
        wall: started.elapsed(),
    }]);
    println!(
        "heartbeat: {overlaps} overlaps, extensions {:?}, late settlements {}; {stats:?}\nproxy: {counts:?}",
        stats.extensions, stats.late_settlements
    );

    assert_nothing_lost("heartbeat", &tally);
    let cmvb = counts.action("ChangeMessageVisibilityBatch");
    assert!(
        cmvb.injected_total() > 0,
        "the heartbeat was throttled: {cmvb:?}"
    );
    assert_eq!(
        stats.change_message_visibility_batch.failed,
        cmvb.failed(),
        "every throttled extension call counted"
    );
    assert!(
        stats.extensions.ok >= MESSAGES as u64,
        "the retries got extensions through: {:?}",
        stats.extensions
    );
    let counted = stats.extensions.failed + stats.late_settlements;
    assert!(
        overlaps as u64 <= counted,
        "{} messages handed out again while their handlers ran, but only {} failed extensions \
         and {} late settlements counted",
        overlaps,
        stats.extensions.failed,
        stats.late_settlements
    );
    assert!(
        tally.duplicates <= stats.settled_failed() + counted,
        "{} duplicates unexplained",
        tally.duplicates
    );
    // And message by message: the engine warned about each one handed out again.
    let logs = warnings.text();
    let unwarned: Vec<String> = ledger
        .lock()
        .overlaps
        .iter()
        .filter(|id| {
            !logs
                .lines()
                .any(|l| l.contains("WARN") && l.contains("sqs_engine") && l.contains(id.as_str()))
        })
        .cloned()
        .collect();
    assert!(
        unwarned.is_empty(),
        "handed out again while their handlers ran, with no warning naming them: {unwarned:?}"
    );
}
