//! `loadtest large-payloads`: what a body stored in S3 costs against the same body sent in
//! SQS, in one run on one SQS and S3 (LocalStack by default).
//!
//! Each variant's messages are published through sqs-engine's broker (`SqsPublisher`, with
//! `LargePayloads` for the stored variant) and consumed by the engine, acking each; the report
//! gives each phase's SQS and S3 calls per message, CPU per message and messages a second, and
//! the stored variant's figures over the plain one's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use aws_sdk_s3::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_s3::config::{ConfigBag, Intercept};
use aws_sdk_s3::error::BoxError;
use futures::future::try_join_all;
use nix::sys::resource::{UsageWho, getrusage};
use ruststream::{Broker, BytesMut, ConnectedBroker, HeaderMap, OutgoingMessage, Publisher};
use sqs_engine::prelude::{SqsBroker, SqsError};
use sqs_engine::{AwsSqs, Engine, LargePayloads, Message, Outcome};
use tokio::time::Instant;

use crate::target::TargetArgs;

/// Options of `loadtest large-payloads`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LargePayloadArgs {
    /// Where SQS and S3 are (LocalStack's default port unless told).
    #[command(flatten)]
    target: TargetArgs,

    /// Messages of each variant.
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    messages: u64,

    /// Each body's size in bytes: over the 256 KiB threshold, under SQS's 1 MiB limit.
    #[arg(long, default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(262_145..=1_000_000))]
    size: u64,
}

/// One variant's measurements of one phase.
#[derive(Debug, Clone, Copy, Default)]
struct Phase {
    seconds: f64,
    cpu_seconds: f64,
    sqs_calls: u64,
    s3_calls: u64,
}

impl Phase {
    /// The phase begun at `started`, with the counts and CPU time then.
    fn since(
        (sqs_before, s3_before): (u64, u64),
        cpu_before: f64,
        started: Instant,
        counters: &Counters,
    ) -> Result<Self> {
        let (sqs, s3) = counters.now();
        Ok(Self {
            seconds: started.elapsed().as_secs_f64(),
            cpu_seconds: cpu_seconds()? - cpu_before,
            sqs_calls: sqs - sqs_before,
            s3_calls: s3 - s3_before,
        })
    }

    fn per_message(&self, messages: u64, value: f64) -> f64 {
        value / messages as f64
    }
}

/// Counts a client's operations (each counted once, whatever its retries). The SQS and S3
/// clients share the SDK's interceptor trait.
#[derive(Debug, Clone, Default)]
struct Calls(Arc<AtomicU64>);

impl Intercept for Calls {
    fn name(&self) -> &'static str {
        "Calls"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl Calls {
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The SQS and S3 calls of a run so far.
#[derive(Debug, Clone, Default)]
struct Counters {
    sqs: Calls,
    s3: Calls,
}

impl Counters {
    fn now(&self) -> (u64, u64) {
        (self.sqs.get(), self.s3.get())
    }
}

/// The process's CPU time so far, user and system, in seconds.
fn cpu_seconds() -> Result<f64> {
    let usage = getrusage(UsageWho::RUSAGE_SELF).context("getrusage")?;
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Ok(seconds(usage.user_time()) + seconds(usage.system_time()))
}

/// Runs both variants and prints the report.
///
/// # Errors
///
/// When the bucket or a queue cannot be made, a publish fails, or the engine fails or does
/// not finish the messages within ten minutes.
pub(crate) async fn run(args: LargePayloadArgs) -> Result<()> {
    let mut target = args.target.clone();
    target
        .endpoint
        .get_or_insert_with(|| "http://127.0.0.1:4566".to_owned());
    let config = target.sdk_config().await;
    let counters = Counters::default();
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .interceptor(counters.s3.clone())
            .build(),
    );
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&config)
            .interceptor(counters.sqs.clone())
            .build(),
    );
    let run_id = format!("{:08x}", fastrand::u32(..));
    let bucket = format!("loadtest-payloads-{run_id}");
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .context("CreateBucket")?;
    let body = "x".repeat(usize::try_from(args.size)?);
    let mut results = Vec::new();
    for stored in [false, true] {
        let queue = format!(
            "loadtest-payloads-{run_id}-{}",
            if stored { "s3" } else { "sqs" }
        );
        let url = sqs
            .create_queue()
            .queue_name(&queue)
            .send()
            .await
            .context("CreateQueue")?
            .queue_url
            .context("CreateQueue gave no URL")?;
        let payloads = stored.then(|| LargePayloads::new(s3.clone()).bucket(&bucket));
        let api = AwsSqs::new(sqs.clone());
        let publish = publish(
            api.clone(),
            payloads.clone(),
            &queue,
            &body,
            args.messages,
            &counters,
        )
        .await?;
        let consume = consume(api, &url, payloads, body.len(), args.messages, &counters).await?;
        let left = s3
            .list_objects_v2()
            .bucket(&bucket)
            .send()
            .await
            .context("ListObjectsV2")?
            .key_count
            .unwrap_or_default();
        if left != 0 {
            tracing::warn!(objects = left, "objects left in the bucket after the acks");
        }
        results.push((stored, publish, consume));
    }
    report(&args, &results);
    Ok(())
}

/// Publishes `messages` copies of `body` to `queue` through the broker, fifty at a time.
async fn publish(
    api: AwsSqs,
    payloads: Option<LargePayloads>,
    queue: &str,
    body: &str,
    messages: u64,
    counters: &Counters,
) -> Result<Phase> {
    let mut broker = SqsBroker::new().api(api);
    if let Some(payloads) = payloads {
        broker = broker.large_payloads(payloads);
    }
    let connected = broker.connect().await.context("connect the broker")?;
    let publisher = connected.publisher();
    let (before, cpu_before, started) = (counters.now(), cpu_seconds()?, Instant::now());
    let mut left = messages;
    while left > 0 {
        let chunk = left.min(50);
        try_join_all((0..chunk).map(|_| {
            publisher.publish(
                OutgoingMessage::produced(queue, BytesMut::from(body.as_bytes()))
                    .with_headers(HeaderMap::new()),
                None,
            )
        }))
        .await
        .map_err(|error: SqsError| anyhow::anyhow!("publish: {error}"))?;
        left -= chunk;
    }
    let phase = Phase::since(before, cpu_before, started, counters)?;
    connected.shutdown().await.context("broker shutdown")?;
    Ok(phase)
}

/// Consumes `messages` from `url` with the engine, acking each, and checks that each body
/// came whole (`size` bytes).
async fn consume(
    api: AwsSqs,
    url: &str,
    payloads: Option<LargePayloads>,
    size: usize,
    messages: u64,
    counters: &Counters,
) -> Result<Phase> {
    let mut builder = Engine::builder()
        .api(api)
        .queue(url)
        .wait_time(Duration::from_secs(1));
    if let Some(payloads) = payloads {
        builder = builder.large_payloads(payloads);
    }
    let engine = builder.build()?;
    let done = Arc::new(AtomicU64::new(0));
    let whole = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(tokio::sync::Notify::new());
    let (before, cpu_before, started) = (counters.now(), cpu_seconds()?, Instant::now());
    let stop = {
        let finished = Arc::clone(&finished);
        async move { finished.notified().await }
    };
    let handler = {
        let (done, whole, finished) =
            (Arc::clone(&done), Arc::clone(&whole), Arc::clone(&finished));
        move |message: Message| {
            let (done, whole, finished) =
                (Arc::clone(&done), Arc::clone(&whole), Arc::clone(&finished));
            async move {
                if message.body().len() == size {
                    whole.fetch_add(1, Ordering::SeqCst);
                }
                if done.fetch_add(1, Ordering::SeqCst) + 1 == messages {
                    finished.notify_one();
                }
                Outcome::Ack
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(600), engine.run(handler, stop))
        .await
        .context("the messages were not finished within ten minutes")??;
    let seconds = started.elapsed().as_secs_f64();
    // The objects' deletes go out once SQS confirms the messages' deletes: counted, not timed.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let phase = Phase {
        seconds,
        ..Phase::since(before, cpu_before, started, counters)?
    };
    let (done, whole) = (done.load(Ordering::SeqCst), whole.load(Ordering::SeqCst));
    if done < messages || whole < done {
        bail!("{done} of {messages} messages handled, {whole} of them with their whole body");
    }
    Ok(phase)
}

/// Prints each variant's phases and the stored variant's over the plain one's.
fn report(args: &LargePayloadArgs, results: &[(bool, Phase, Phase)]) {
    let n = args.messages;
    println!(
        "large payloads: {n} messages of {} bytes each way; published through the broker, consumed by the engine (acking)",
        args.size
    );
    println!(
        "{:<8} {:<8} {:>10} {:>14} {:>13} {:>13}",
        "variant", "phase", "msg/s", "CPU µs/msg", "SQS calls/msg", "S3 calls/msg"
    );
    let row = |name: &str, phase_name: &str, phase: &Phase| {
        println!(
            "{name:<8} {phase_name:<8} {:>10.0} {:>14.0} {:>13.3} {:>13.3}",
            n as f64 / phase.seconds,
            phase.per_message(n, phase.cpu_seconds) * 1e6,
            phase.per_message(n, phase.sqs_calls as f64),
            phase.per_message(n, phase.s3_calls as f64),
        );
    };
    for (stored, publish, consume) in results {
        let name = if *stored { "s3" } else { "sqs" };
        row(name, "publish", publish);
        row(name, "consume", consume);
    }
    if let [
        (_, plain_publish, plain_consume),
        (_, s3_publish, s3_consume),
    ] = results
    {
        for (phase_name, plain, s3) in [
            ("publish", plain_publish, s3_publish),
            ("consume", plain_consume, s3_consume),
        ] {
            println!(
                "s3/sqs   {phase_name:<8} throughput {:.2}, CPU per message {:.2}",
                plain.seconds / s3.seconds,
                s3.cpu_seconds / plain.cpu_seconds
            );
        }
    }
}
