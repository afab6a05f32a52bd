//! [`StandIn`]: an SQS inside the crate, for its unit tests on a paused clock and for the
//! benches. It names every queue it is asked for, takes every setting (its queues report no
//! visibility timeout of their own), answers no receive unless scripted to, and answers each
//! batch call from a script: by default, every entry succeeds. What
//! SQS itself does is proven against LocalStack in `tests/`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::api::{
    BoxFuture, CallError, EntryFailure, EntryResult, QueueAttributes, ReceiveRequest,
    ReceivedMessage, SendEntry, SqsApi,
};

/// How long a batch call made during a brownout takes to fail: a call timeout's worth.
const BROWNOUT_TIMEOUT: Duration = Duration::from_secs(10);

/// A batch call's answer.
pub(crate) type Answer = Result<Vec<EntryResult>, CallError>;

/// A receive's answer, and how long it takes.
pub(crate) type ReceiveAnswer = (Duration, Result<Vec<ReceivedMessage>, CallError>);

/// A scripted SQS; see the module docs. Shared as an `Arc`, so a test keeps a handle on what
/// it recorded.
#[derive(Default)]
pub(crate) struct StandIn {
    /// The answers of the next batch calls, in order; once spent, every entry succeeds.
    answers: Mutex<VecDeque<Answer>>,
    /// Whether each batch call's entries are kept.
    record: bool,
    /// The entries of each batch call, as text: receipt handles for deletes,
    /// `handle=seconds` for visibility changes, bodies for sends.
    calls: Mutex<Vec<Vec<String>>>,
    /// A sent body that starts with this is refused, as SQS refuses a message it cannot take.
    refuse: Option<&'static str>,
    /// How long each batch call takes.
    latency: Duration,
    /// Whether each batch call panics, as a faulty [`SqsApi`] implementation may.
    panics: bool,
    /// The answers of the next receives, each after its delay; once spent, a receive never
    /// answers.
    receives: Mutex<VecDeque<ReceiveAnswer>>,
    /// The `ReceiveRequestAttemptId` of each receive, in order.
    attempt_ids: Mutex<Vec<Option<String>>>,
    /// Batch calls made from the first instant to the second get no answer: each fails as a
    /// call timeout would, after [`BROWNOUT_TIMEOUT`].
    brownout: Option<(Instant, Instant)>,
    /// Receives under way now, and the most there were at once.
    under_way: Arc<AtomicUsize>,
    most_under_way: Arc<AtomicUsize>,
}

/// Counts a receive as under way until dropped.
struct Receiving(Arc<AtomicUsize>);

impl Drop for Receiving {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl StandIn {
    /// Answers every batch call with success at once, and records nothing.
    #[cfg(feature = "bench")]
    pub(crate) fn answering() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Answers the next batch calls with `answers`, then with success, and records every call.
    #[cfg(test)]
    pub(crate) fn scripted(answers: Vec<Answer>) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.into()),
            record: true,
            ..Self::default()
        })
    }

    /// Panics in every batch call.
    #[cfg(test)]
    pub(crate) fn panicking() -> Arc<Self> {
        Arc::new(Self {
            panics: true,
            ..Self::default()
        })
    }

    /// Answers the first receive with `messages` after `delay` (a long poll that waited, or a
    /// slow answer), then no receive; records every batch call, answered with success.
    #[cfg(test)]
    pub(crate) fn receiving(delay: Duration, messages: Vec<ReceivedMessage>) -> Arc<Self> {
        Self::receiving_script(vec![(delay, Ok(messages))])
    }

    /// Receives under way now.
    #[cfg(test)]
    pub(crate) fn receives_under_way(&self) -> usize {
        self.under_way.load(Ordering::SeqCst)
    }

    /// The most receives there were under way at once.
    #[cfg(test)]
    pub(crate) fn most_receives_under_way(&self) -> usize {
        self.most_under_way.load(Ordering::SeqCst)
    }

    /// Answers the next receives from `script`, each after its delay, then no receive; records
    /// every batch call, answered with success.
    #[cfg(test)]
    pub(crate) fn receiving_script(script: Vec<ReceiveAnswer>) -> Arc<Self> {
        Arc::new(Self {
            record: true,
            receives: Mutex::new(script.into()),
            ..Self::default()
        })
    }

    /// As [`receiving_script`](Self::receiving_script), with every batch call answered after
    /// `latency`.
    #[cfg(test)]
    pub(crate) fn receiving_script_settling_in(
        script: Vec<ReceiveAnswer>,
        latency: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            record: true,
            receives: Mutex::new(script.into()),
            latency,
            ..Self::default()
        })
    }

    /// As [`receiving_script`](Self::receiving_script), with every batch call made from
    /// `from` to `until` after now failing as if it got no answer in time.
    #[cfg(test)]
    pub(crate) fn receiving_script_browning_out(
        script: Vec<ReceiveAnswer>,
        from: Duration,
        until: Duration,
    ) -> Arc<Self> {
        let now = Instant::now();
        Arc::new(Self {
            record: true,
            receives: Mutex::new(script.into()),
            brownout: Some((now + from, now + until)),
            ..Self::default()
        })
    }

    /// The attempt id of each receive so far.
    #[cfg(test)]
    pub(crate) fn attempt_ids(&self) -> Vec<Option<String>> {
        self.attempt_ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Refuses a sent body that starts with `prefix`, and records every call.
    #[cfg(all(test, feature = "ruststream"))]
    pub(crate) fn refusing(prefix: &'static str, latency: Duration) -> Arc<Self> {
        Arc::new(Self {
            record: true,
            refuse: Some(prefix),
            latency,
            ..Self::default()
        })
    }

    /// Answers the next receives from `script` as [`receiving_script`](Self::receiving_script)
    /// does, and every batch call after `latency`, refusing each entry that starts with
    /// `prefix` (a delete's receipt handle, a visibility change's `handle=seconds`).
    #[cfg(all(test, feature = "ruststream"))]
    pub(crate) fn receiving_and_refusing(
        script: Vec<ReceiveAnswer>,
        prefix: &'static str,
        latency: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            record: true,
            receives: Mutex::new(script.into()),
            refuse: Some(prefix),
            latency,
            ..Self::default()
        })
    }

    /// The entries of each batch call so far.
    #[cfg(test)]
    pub(crate) fn calls(&self) -> Vec<Vec<String>> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records a call of `count` entries (their texts made only when recording) and answers it.
    fn answer(&self, count: usize, entries: impl FnOnce() -> Vec<String>) -> BoxFuture<'_, Answer> {
        assert!(
            !self.panics,
            "the stand-in's batch call panics, as it was told to"
        );
        let entries = self.record.then(entries);
        let refused: Vec<bool> = match (&entries, self.refuse) {
            (Some(entries), Some(prefix)) => {
                entries.iter().map(|e| e.starts_with(prefix)).collect()
            }
            _ => vec![false; count],
        };
        if let Some(entries) = entries {
            self.calls
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(entries);
        }
        let now = Instant::now();
        if self
            .brownout
            .is_some_and(|(from, until)| from <= now && now < until)
        {
            return Box::pin(async {
                tokio::time::sleep(BROWNOUT_TIMEOUT).await;
                Err(CallError::new(
                    crate::api::CallErrorKind::Network,
                    "no answer within the call timeout",
                ))
            });
        }
        let scripted = self
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let answer = scripted.unwrap_or_else(|| {
            Ok(refused
                .into_iter()
                .map(|refused| {
                    if refused {
                        EntryResult::Failed(EntryFailure {
                            code: "InvalidMessageContents".into(),
                            sender_fault: true,
                            message: None,
                        })
                    } else {
                        EntryResult::Ok
                    }
                })
                .collect())
        });
        let latency = self.latency;
        Box::pin(async move {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            answer
        })
    }
}

impl SqsApi for StandIn {
    fn queue_url<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async move { Ok(format!("http://sqs.stand-in/000000000000/{name}")) })
    }

    fn create_queue<'a>(
        &'a self,
        name: &'a str,
        _attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        self.queue_url(name)
    }

    fn queue_attributes<'a>(
        &'a self,
        url: &'a str,
    ) -> BoxFuture<'a, Result<QueueAttributes, CallError>> {
        let fifo = url.ends_with(".fifo");
        Box::pin(async move {
            Ok(QueueAttributes {
                fifo,
                ..QueueAttributes::default()
            })
        })
    }

    fn set_queue_attributes<'a>(
        &'a self,
        _url: &'a str,
        _attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<(), CallError>> {
        Box::pin(async { Ok(()) })
    }

    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        self.attempt_ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.attempt_id.map(str::to_owned));
        let next = self
            .receives
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let now = self.under_way.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_under_way.fetch_max(now, Ordering::SeqCst);
        let under_way = Receiving(Arc::clone(&self.under_way));
        Box::pin(async move {
            let _under_way = under_way;
            match next {
                Some((delay, answer)) => {
                    tokio::time::sleep(delay).await;
                    answer
                }
                None => std::future::pending().await,
            }
        })
    }

    fn delete_message_batch<'a>(
        &'a self,
        _url: &'a str,
        handles: &'a [&'a str],
    ) -> BoxFuture<'a, Answer> {
        self.answer(handles.len(), || {
            handles.iter().map(|handle| (*handle).to_owned()).collect()
        })
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        _url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Answer> {
        self.answer(entries.len(), || {
            entries
                .iter()
                .map(|(handle, seconds)| format!("{handle}={seconds}"))
                .collect()
        })
    }

    fn send_message_batch<'a>(
        &'a self,
        _url: &'a str,
        entries: &'a [SendEntry],
    ) -> BoxFuture<'a, Answer> {
        self.answer(entries.len(), || {
            entries.iter().map(|entry| entry.body.clone()).collect()
        })
    }
}

/// A message of id `id` as a receive brings it, on its first delivery.
#[cfg(test)]
pub(crate) fn message(id: &str) -> ReceivedMessage {
    ReceivedMessage {
        message_id: id.to_owned(),
        receipt_handle: format!("{id}-receipt"),
        body: "body".to_owned(),
        attributes: std::collections::HashMap::from([(
            "ApproximateReceiveCount".to_owned(),
            "1".to_owned(),
        )]),
        message_attributes: std::collections::HashMap::new(),
    }
}

/// `count` receive answers of a full batch each, after `delay`, with ids `m{first}` on.
#[cfg(test)]
pub(crate) fn full_receives(first: usize, count: usize, delay: Duration) -> Vec<ReceiveAnswer> {
    (0..count)
        .map(|batch| {
            let messages = (0..10)
                .map(|i| message(&format!("m{}", first + batch * 10 + i)))
                .collect();
            (delay, Ok(messages))
        })
        .collect()
}
