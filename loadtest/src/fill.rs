//! `loadtest fill`: puts a number of messages on a queue with `SendMessageBatch`, several
//! calls in flight, resending the entries SQS refuses so that exactly that many land.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::{BatchResultErrorEntry, SendMessageBatchRequestEntry};
use clap::builder::RangedU64ValueParser;
use sqs_engine::limits::MAX_BATCH_ENTRIES;
use tokio::task::JoinSet;
use tokio::time::{Instant, interval_at};
use tracing::{info, warn};

use crate::progress::LOG_EVERY;
use crate::report::{self, FillReport};
use crate::target::{QueueTarget, resolve_queue_url};

/// The most bytes of message bodies one `SendMessageBatch` carries (SQS's historical limit
/// for a batch, which every implementation accepts).
const MAX_BATCH_BYTES: usize = 262_144;

/// How many times one batch's entries are sent before the fill gives up on them.
const MAX_ATTEMPTS: u32 = 8;

/// The wait before the first resend; it doubles on each further one.
const FIRST_RESEND_DELAY: Duration = Duration::from_millis(100);

/// The longest wait between resends.
const MAX_RESEND_DELAY: Duration = Duration::from_secs(5);

/// Options of `loadtest fill`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct FillArgs {
    /// Where SQS is, and the queue.
    #[command(flatten)]
    on: QueueTarget,

    /// How many messages to send.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    messages: u64,

    /// Size of each message body, in bytes (1..=262144).
    #[arg(long, default_value_t = 200, value_parser = RangedU64ValueParser::<usize>::new().range(1..=262_144))]
    size: usize,

    /// SendMessageBatch calls in flight at once (1..=1024).
    #[arg(long, default_value_t = 16, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1024))]
    concurrency: usize,

    /// Create the queue (standard, default attributes) when it does not exist.
    #[arg(long)]
    create: bool,

    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

/// What the sender tasks of one fill share.
#[derive(Debug)]
struct Fill {
    /// The SQS client.
    client: Client,
    /// The queue's URL.
    queue_url: String,
    /// Messages to send in all.
    total: u64,
    /// Messages per `SendMessageBatch` call.
    batch_size: usize,
    /// Size of each body, in bytes.
    body_size: usize,
    /// The next batch to claim, by index.
    next_batch: AtomicU64,
    /// Messages SQS has accepted.
    sent: AtomicU64,
    /// `SendMessageBatch` calls made.
    calls: AtomicU64,
    /// Entries sent again after SQS refused them.
    resent: AtomicU64,
    /// FIFO message groups the messages are spread over, in turn; `None` on a standard
    /// queue.
    groups: Option<u64>,
}

/// Runs `loadtest fill`: prints the report and, with `--json`, writes it.
///
/// # Errors
///
/// When the queue cannot be resolved or created, when a call fails after the SDK's own
/// retries, or when SQS keeps refusing some messages.
pub(crate) async fn run(args: FillArgs) -> Result<()> {
    let config = args.on.target.sdk_config().await;
    let client = Client::new(&config);
    let queue_url = resolve_queue_url(&client, &args.on.queue, args.create).await?;
    info!(%queue_url, messages = args.messages, "filling");

    let start = Instant::now();
    let fill = fill_queue(
        client,
        queue_url,
        args.messages,
        args.size,
        args.concurrency,
        None,
    )
    .await
    .with_context(|| format!("filling `{}`", args.on.queue))?;
    let batch_size = fill.batch_size;
    let senders = fill.senders;
    let elapsed_secs = start.elapsed().as_secs_f64();

    let sent = fill.sent;
    let report = FillReport {
        queue: args.on.queue.clone(),
        queue_url: fill.queue_url.clone(),
        endpoint: args.on.target.endpoint.clone(),
        messages_requested: args.messages,
        messages_sent: sent,
        body_bytes: args.size,
        batch_size,
        concurrency: senders,
        send_message_batch_calls: fill.calls,
        entries_resent: fill.resent,
        elapsed_secs,
        messages_per_sec: report::per_sec(sent, elapsed_secs),
    };
    print!("{report}");
    if let Some(path) = &args.json {
        report::write_json(path, &report)?;
    }
    if sent != args.messages {
        bail!("sent {sent} messages, not {}", args.messages);
    }
    Ok(())
}

/// A fill in progress or done, as [`fill_queue`] leaves it.
#[derive(Debug)]
pub(crate) struct Filled {
    /// The queue's URL.
    pub(crate) queue_url: String,
    /// Messages sent.
    pub(crate) sent: u64,
    /// `SendMessageBatch` calls, resends included.
    pub(crate) calls: u64,
    /// Entries resent.
    pub(crate) resent: u64,
    /// Messages per call.
    pub(crate) batch_size: usize,
    /// Sender tasks used.
    pub(crate) senders: usize,
}

/// Puts `total` messages of `body_size` bytes on the queue at `queue_url` with
/// `SendMessageBatch`, `concurrency` calls in flight, logging progress at `info`.
///
/// With `groups` (a FIFO queue), message `i` goes to group `i % groups` as that group's
/// message `i / groups` (written in its body, see [`fifo_body`]), with deduplication id `i`,
/// one call at a time so that each group's messages land in the order of their numbers.
///
/// # Errors
///
/// When a call fails after the SDK's own retries, or SQS keeps refusing some messages.
pub(crate) async fn fill_queue(
    client: Client,
    queue_url: String,
    total: u64,
    body_size: usize,
    concurrency: usize,
    groups: Option<u64>,
) -> Result<Filled> {
    let batch_size = batch_size_for(body_size);
    let concurrency = if groups.is_some() { 1 } else { concurrency };
    let groups = groups.map(|groups| groups.max(1));
    let fill = Arc::new(Fill {
        client,
        queue_url,
        total,
        batch_size,
        body_size,
        next_batch: AtomicU64::new(0),
        sent: AtomicU64::new(0),
        calls: AtomicU64::new(0),
        resent: AtomicU64::new(0),
        groups,
    });
    let start = Instant::now();
    let batches = total.div_ceil(batch_size as u64);
    let senders = usize::try_from(batches).map_or(concurrency, |b| b.min(concurrency));
    let mut tasks = JoinSet::new();
    for _ in 0..senders {
        tasks.spawn(send_batches(Arc::clone(&fill)));
    }
    let mut progress = interval_at(start + LOG_EVERY, LOG_EVERY);
    let bar = crate::progress::bar(fill.total, "fill");
    let mut redraw = interval_at(start, crate::progress::REDRAW_EVERY);
    loop {
        tokio::select! {
            joined = tasks.join_next() => match joined {
                None => break,
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(error))) => {
                    tasks.abort_all();
                    return Err(error.context(format!(
                        "{} of {} messages were sent",
                        fill.sent.load(Ordering::Relaxed),
                        fill.total
                    )));
                }
                Some(Err(error)) => {
                    tasks.abort_all();
                    return Err(anyhow!(error).context("a sender task failed"));
                }
            },
            _ = progress.tick() => {
                info!(sent = fill.sent.load(Ordering::Relaxed), total = fill.total, "progress");
            }
            _ = redraw.tick() => bar.set_position(fill.sent.load(Ordering::Relaxed)),
        }
    }
    bar.finish_and_clear();
    Ok(Filled {
        queue_url: fill.queue_url.clone(),
        sent: fill.sent.load(Ordering::Relaxed),
        calls: fill.calls.load(Ordering::Relaxed),
        resent: fill.resent.load(Ordering::Relaxed),
        batch_size,
        senders,
    })
}

/// Messages per `SendMessageBatch` call for bodies of `body_size` bytes: up to ten, as many
/// as fit in [`MAX_BATCH_BYTES`].
fn batch_size_for(body_size: usize) -> usize {
    (MAX_BATCH_BYTES / body_size.max(1)).clamp(1, MAX_BATCH_ENTRIES)
}

/// The body of message `index`, sent at `sent_micros` (microseconds since the Unix epoch): a
/// readable prefix naming it and its send time, padded with `x` to `size` bytes. The load
/// test's handlers read both back with [`crate::behaviour::parse_body`].
pub(crate) fn body(index: u64, sent_micros: u64, size: usize) -> String {
    padded(format!("loadtest message {index} {sent_micros} "), size)
}

/// The body of message `index` of a FIFO fill over `groups` groups: as [`body`], with its
/// group and its number in the group after the send time (`loadtest message 17
/// 1764500000123456 7/0 xxx`), which the load test's handlers read back with
/// [`crate::behaviour::parse_group_seq`].
pub(crate) fn fifo_body(index: u64, sent_micros: u64, size: usize, groups: u64) -> String {
    padded(
        format!(
            "loadtest message {index} {sent_micros} {}/{} ",
            index % groups,
            index / groups
        ),
        size,
    )
}

/// `prefix` cut or padded with `x` to `size` bytes.
fn padded(mut prefix: String, size: usize) -> String {
    if prefix.len() >= size {
        prefix.truncate(size);
    } else {
        let padding = size - prefix.len();
        prefix.extend(std::iter::repeat_n('x', padding));
    }
    prefix
}

/// Microseconds since the Unix epoch, now; zero if the clock is before it.
pub(crate) fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}

/// One sender: claims batches until none is left, and sends each.
async fn send_batches(fill: Arc<Fill>) -> Result<()> {
    loop {
        let batch = fill.next_batch.fetch_add(1, Ordering::Relaxed);
        let first = batch.saturating_mul(fill.batch_size as u64);
        if first >= fill.total {
            return Ok(());
        }
        let count = (fill.total - first).min(fill.batch_size as u64);
        send_batch(&fill, first, count).await?;
    }
}

/// Sends messages `first..first + count` in one `SendMessageBatch`, and resends the entries
/// SQS refuses for a transient reason, with a doubling delay, up to [`MAX_ATTEMPTS`] calls.
///
/// # Errors
///
/// When the call itself fails (after the SDK's own retries), when SQS refuses an entry as the
/// sender's fault, or when entries are still refused after the last attempt.
async fn send_batch(fill: &Fill, first: u64, count: u64) -> Result<()> {
    let mut pending = (0..count)
        .map(|offset| {
            let index = first + offset;
            let entry = SendMessageBatchRequestEntry::builder().id(offset.to_string());
            let entry = match fill.groups {
                None => entry.message_body(body(index, now_micros(), fill.body_size)),
                Some(groups) => entry
                    .message_body(fifo_body(index, now_micros(), fill.body_size, groups))
                    .message_group_id(format!("g{}", index % groups))
                    .message_deduplication_id(index.to_string()),
            };
            entry.build().context("building a SendMessageBatch entry")
        })
        .collect::<Result<Vec<_>>>()?;
    let mut delay = FIRST_RESEND_DELAY;
    let mut last_failure = String::new();
    for attempt in 1..=MAX_ATTEMPTS {
        if attempt > 1 {
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(MAX_RESEND_DELAY);
            fill.resent
                .fetch_add(pending.len() as u64, Ordering::Relaxed);
        }
        fill.calls.fetch_add(1, Ordering::Relaxed);
        let output = fill
            .client
            .send_message_batch()
            .queue_url(&fill.queue_url)
            .set_entries(Some(pending.clone()))
            .send()
            .await
            .map_err(|error| {
                anyhow!(
                    "SendMessageBatch to {} failed: {}",
                    fill.queue_url,
                    DisplayErrorContext(error)
                )
            })?;
        if let Some(refused) = output.failed.iter().find(|entry| entry.sender_fault) {
            bail!(
                "SQS refused entry {} of the batch from message {first} as the sender's fault: {}",
                refused.id,
                describe(refused)
            );
        }
        let accepted: HashSet<&str> = output
            .successful
            .iter()
            .map(|entry| entry.id.as_str())
            .collect();
        let before = pending.len();
        pending.retain(|entry| !accepted.contains(entry.id()));
        fill.sent
            .fetch_add((before - pending.len()) as u64, Ordering::Relaxed);
        if pending.is_empty() {
            return Ok(());
        }
        last_failure = output
            .failed
            .first()
            .map_or_else(|| "entries missing from the answer".to_owned(), describe);
        warn!(
            attempt,
            refused = pending.len(),
            reason = %last_failure,
            "SendMessageBatch refused some entries; resending them"
        );
    }
    bail!(
        "{} messages still refused after {MAX_ATTEMPTS} SendMessageBatch attempts; last reason: {last_failure}",
        pending.len()
    )
}

/// A refused entry's code and message, as text.
fn describe(entry: &BatchResultErrorEntry) -> String {
    match &entry.message {
        Some(message) => format!("{}: {message}", entry.code),
        None => entry.code.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_has_the_size_asked_for() {
        assert_eq!(body(7, 99, 200).len(), 200);
        assert!(body(7, 99, 200).starts_with("loadtest message 7 99 x"));
        assert_eq!(body(123_456, 99, 5), "loadt");
        assert_eq!(body(0, 99, 1).len(), 1);
    }

    #[test]
    fn a_batch_holds_ten_bodies_or_as_many_as_fit() {
        assert_eq!(batch_size_for(200), 10);
        assert_eq!(batch_size_for(26_214), 10);
        assert_eq!(batch_size_for(65_536), 4);
        assert_eq!(batch_size_for(262_144), 1);
    }
}
