//! Runs `ledger-consumer` as a child process and follows its status lines.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use sqs_engine_test_support::counts;
use sqs_engine_test_support::ledger::{self, Tally};

use crate::status::{Kind, Status};

/// How to run one `ledger-consumer`.
#[derive(Debug, Clone)]
pub struct ConsumerArgs {
    /// The SQS endpoint.
    pub endpoint: String,
    /// The queue, by name or URL.
    pub queue: String,
    /// The ledger file.
    pub ledger: PathBuf,
    /// Handler invocations at once.
    pub workers: usize,
    /// Long-poll loops.
    pub receivers: usize,
    /// Messages received ahead of a free worker. The consumer's `max_held` is
    /// `workers + prefetch`: the bound the tests check what it holds against.
    pub prefetch: usize,
    /// How long each handler sleeps before it writes the ledger and acks.
    pub handler_ms: u64,
    /// The visibility timeout asked for at each receive.
    pub visibility_secs: u64,
    /// How long shutdown waits for running handlers.
    pub shutdown_timeout_secs: u64,
    /// The long-poll wait.
    pub wait_secs: u64,
}

/// A queue of a scenario's own on the test endpoint, filled with its messages, from which
/// the scenario's consumers take their settings.
pub struct FilledQueue {
    /// The SQS endpoint.
    pub endpoint: String,
    /// A client of it.
    pub client: aws_sdk_sqs::Client,
    /// The queue's name.
    pub name: String,
    /// The queue's URL.
    pub url: String,
    /// The ids of the messages sent, in order.
    pub sent: Vec<String>,
}

impl FilledQueue {
    /// Creates a queue named after `prefix` (visibility timeout 30 s) and sends it `messages`
    /// bodies `{prefix}-0`, `{prefix}-1`, ..., over `lanes` batch calls at once.
    ///
    /// # Panics
    ///
    /// When the endpoint refuses the queue or a send.
    pub async fn new(prefix: &str, messages: usize, lanes: usize) -> Self {
        let endpoint = sqs_engine_test_support::endpoint();
        let client = sqs_engine_test_support::client_at(&endpoint).await;
        let name = sqs_engine_test_support::unique(prefix);
        let url = sqs_engine_test_support::create_queue(&client, &name, 30).await;
        let bodies: Vec<String> = (0..messages).map(|i| format!("{prefix}-{i}")).collect();
        let sent = sqs_engine_test_support::send_ids(&client, &url, &bodies, lanes).await;
        Self {
            endpoint,
            client,
            name,
            url,
            sent,
        }
    }

    /// The settings of a consumer of this queue writing its ledger to `ledger` under
    /// `dir`: 16 workers, 4 receivers, a prefetch of 40, 5 ms handlers, visibility 30 s, 10 s
    /// for running handlers at shutdown, 1 s long polls. Change what a scenario needs.
    pub fn consumer(&self, dir: &Path, ledger: &str) -> ConsumerArgs {
        ConsumerArgs {
            endpoint: self.endpoint.clone(),
            queue: self.name.clone(),
            ledger: dir.join(format!("{}-{ledger}.ledger", self.name)),
            workers: 16,
            receivers: 4,
            prefetch: 40,
            handler_ms: 5,
            visibility_secs: 30,
            shutdown_timeout_secs: 10,
            wait_secs: 1,
        }
    }

    /// Runs a second consumer (the settings `first` ran with, another ledger under `dir`,
    /// from `binary`) until every message sent is processed and the queue is empty (at most a
    /// minute), then stops it with SIGTERM and waits up to `exit_limit` for it to exit.
    ///
    /// # Errors
    ///
    /// When the second consumer cannot be started, signalled or waited for. Not finishing
    /// within the minute is in [`SecondRun::finished`].
    pub async fn finish_with_second(
        &self,
        binary: &Path,
        dir: &Path,
        first: &ConsumerArgs,
        exit_limit: Duration,
    ) -> anyhow::Result<SecondRun> {
        let args = ConsumerArgs {
            ledger: self.consumer(dir, "second").ledger,
            ..first.clone()
        };
        let mut second = ConsumerProcess::spawn(binary, &args)?;
        let finished = wait_until_all_processed(
            &self.client,
            &self.url,
            &self.sent,
            &[&first.ledger, &args.ledger],
            Duration::from_secs(60),
        )
        .await
        .map(drop);
        let done = Instant::now();
        second.sigterm()?;
        let (exit, _) = second.wait_exit(exit_limit)?;
        Ok(SecondRun {
            finished,
            done,
            exit,
            last: second.final_status(),
            ledger: args.ledger,
        })
    }
}

/// What the second consumer of [`FilledQueue::finish_with_second`] did.
pub struct SecondRun {
    /// Whether every message was processed and the queue emptied within the minute (an
    /// error saying how far it got when not).
    pub finished: anyhow::Result<()>,
    /// When that was seen (or the minute ran out).
    pub done: Instant,
    /// How the second consumer exited.
    pub exit: ExitStatus,
    /// Its last status line.
    pub last: Option<Status>,
    /// Its ledger.
    pub ledger: PathBuf,
}

impl ConsumerArgs {
    /// The command-line arguments.
    pub fn to_args(&self) -> Vec<String> {
        vec![
            "--endpoint".into(),
            self.endpoint.clone(),
            "--queue".into(),
            self.queue.clone(),
            "--ledger".into(),
            self.ledger.display().to_string(),
            "--workers".into(),
            self.workers.to_string(),
            "--receivers".into(),
            self.receivers.to_string(),
            "--prefetch".into(),
            self.prefetch.to_string(),
            "--max-held".into(),
            (self.workers + self.prefetch).to_string(),
            "--handler-ms".into(),
            self.handler_ms.to_string(),
            "--visibility-secs".into(),
            self.visibility_secs.to_string(),
            "--shutdown-timeout-secs".into(),
            self.shutdown_timeout_secs.to_string(),
            "--wait-secs".into(),
            self.wait_secs.to_string(),
        ]
    }
}

/// A running `ledger-consumer` and every status line it printed so far.
#[derive(Debug)]
pub struct ConsumerProcess {
    child: Child,
    statuses: Arc<Mutex<Vec<Status>>>,
    reader: Option<std::thread::JoinHandle<()>>,
    /// When the process was spawned.
    pub started: Instant,
}

impl ConsumerProcess {
    /// Spawns `binary` with `args`; its stderr goes to this process's stderr.
    ///
    /// # Errors
    ///
    /// When the process cannot be spawned.
    pub fn spawn(binary: &Path, args: &ConsumerArgs) -> anyhow::Result<Self> {
        let mut child = Command::new(binary)
            .args(args.to_args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("spawning {}", binary.display()))?;
        let stdout = child.stdout.take().context("the child's stdout")?;
        let statuses = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let statuses = Arc::clone(&statuses);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    match Status::parse(&line) {
                        Some(status) => lock(&statuses).push(status),
                        None => eprintln!("ledger-consumer: {line}"),
                    }
                }
            })
        };
        Ok(Self {
            child,
            statuses,
            reader: Some(reader),
            started: Instant::now(),
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The latest status line, if any.
    pub fn latest(&self) -> Option<Status> {
        lock(&self.statuses).last().cloned()
    }

    /// Every status line so far.
    pub fn statuses(&self) -> Vec<Status> {
        lock(&self.statuses).clone()
    }

    /// The final status line, once the process printed it.
    pub fn final_status(&self) -> Option<Status> {
        lock(&self.statuses)
            .iter()
            .rev()
            .find(|s| s.kind == Kind::Final)
            .cloned()
    }

    /// The most messages held at once, over every line so far.
    pub fn peak_in_flight(&self) -> u64 {
        lock(&self.statuses)
            .iter()
            .map(|s| s.peak_in_flight.max(s.in_flight))
            .max()
            .unwrap_or(0)
    }

    /// The highest peak RSS reported, KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        lock(&self.statuses)
            .iter()
            .map(|s| s.peak_rss_kib)
            .max()
            .unwrap_or(0)
    }

    /// Polls the status lines every 5 ms until `check` holds for the latest one; returns it.
    ///
    /// # Errors
    ///
    /// When `limit` passes first, or the process exits first.
    pub fn wait_for(
        &mut self,
        limit: Duration,
        what: &str,
        mut check: impl FnMut(&Status) -> bool,
    ) -> anyhow::Result<Status> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.latest()
                && check(&status)
            {
                return Ok(status);
            }
            if let Some(exit) = self.child.try_wait()? {
                bail!("ledger-consumer exited ({exit}) while waiting for: {what}");
            }
            if Instant::now() >= deadline {
                bail!(
                    "timed out after {limit:?} waiting for: {what}; last status {:?}",
                    self.latest()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends SIGTERM: the engine's graceful shutdown.
    ///
    /// # Errors
    ///
    /// When the signal cannot be sent.
    pub fn sigterm(&self) -> anyhow::Result<()> {
        let pid = i32::try_from(self.pid()).context("a pid")?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .context("kill -TERM")
    }

    /// Sends SIGKILL and reaps the process.
    ///
    /// # Errors
    ///
    /// When the signal cannot be sent.
    pub fn kill9(&mut self) -> anyhow::Result<ExitStatus> {
        self.child.kill().context("kill -9")?;
        let status = self.child.wait().context("reaping the killed consumer")?;
        self.join_reader();
        Ok(status)
    }

    /// Waits for the process to exit, at most `limit`; returns its exit status and when it
    /// exited. Kills it when `limit` passes.
    ///
    /// # Errors
    ///
    /// When it is still running after `limit` (it is killed then).
    pub fn wait_exit(&mut self, limit: Duration) -> anyhow::Result<(ExitStatus, Instant)> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                let at = Instant::now();
                self.join_reader();
                return Ok((status, at));
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!("ledger-consumer still running after {limit:?}; killed");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn join_reader(&mut self) {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

impl Drop for ConsumerProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits until the ledgers together cover every message of `sent` and the queue at `url` is
/// empty (nothing visible, nothing in flight); returns the merged ledger counts.
///
/// # Errors
///
/// When `limit` passes first, saying how far it got, or a ledger or the queue cannot be read.
pub async fn wait_until_all_processed(
    client: &aws_sdk_sqs::Client,
    url: &str,
    sent: &[String],
    ledgers: &[&Path],
    limit: Duration,
) -> anyhow::Result<std::collections::HashMap<String, u32>> {
    let deadline = Instant::now() + limit;
    loop {
        let mut all = std::collections::HashMap::new();
        for path in ledgers {
            ledger::merge(&mut all, &ledger::read(path)?);
        }
        let tally = Tally::of(sent, &all);
        if tally.unprocessed == 0 && counts(client, url).await == (0, 0) {
            return Ok(all);
        }
        if Instant::now() >= deadline {
            let counts = counts(client, url).await;
            bail!(
                "after {limit:?}: {} of {} messages processed, queue (visible, in flight) = {counts:?}",
                tally.processed,
                tally.sent
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
