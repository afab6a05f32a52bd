//! The fault layer: an [`SqsApi`] between one consumer and the in-process SQS that draws, per
//! call and from the run's seed, whether the call goes through or fails: throttled, a 5xx,
//! connection refused, no answer within the call timeout (applied before it, after it, or not
//! at all), or an answer lost after SQS applied the request. A batch call that goes through may
//! still fail some of its entries on their own. An outage fails every call of a window alike
//! (throttled, or refused as access denied); the calls that open the queue fail transiently
//! now and then. A liveness run has no faults past its `faults_until`. It notes every call,
//! fault and answer in the record.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{
    BoxFuture, CallError, CallErrorKind, EntryFailure, EntryResult, QueueAttributes,
    ReceiveRequest, ReceivedMessage, SqsApi, SqsDecorator, StatsHandle,
};

use crate::record::{Action, Answer, CallMade, Event, Fault, Record};
use crate::workload::{OutageKind, Workload};

/// The in-process SQS as one consumer sees it, with faults.
pub struct FaultySqs {
    pub sqs: InProcessSqs,
    pub consumer: usize,
    pub record: Record,
    /// The draws for every consumer's calls, in the order the calls are made.
    pub rng: Arc<Mutex<fastrand::Rng>>,
    pub fault_rate: f64,
    pub call_timeout: Duration,
    /// The queue the consumer reads, for the in-flight snapshot after each receive.
    pub queue: String,
    /// The consumer's counters, set once its engine is built.
    pub stats: Arc<Mutex<Option<StatsHandle>>>,
    /// The run: its outage, entry faults and liveness.
    pub workload: Arc<Workload>,
    /// The draws that later versions of the simulation added, from a generator of their own
    /// so that the draws above stay what they were for a seed.
    pub more: Arc<Mutex<fastrand::Rng>>,
}

impl FaultySqs {
    fn draw(&self) -> Option<Fault> {
        let at = self.record.elapsed();
        if let Some(outage) = self.workload.outage
            && outage.covers(at)
            && self.workload.faulty_at(at)
        {
            return Some(Fault::Outage(outage.kind));
        }
        if !self.workload.faulty_at(at) {
            return None;
        }
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        if rng.f64() >= self.fault_rate {
            return None;
        }
        Some(match rng.u8(..6) {
            0 => Fault::Throttled,
            1 => Fault::Server,
            2 => Fault::Refused,
            3 if self.more().bool() => Fault::AppliedLate,
            3 => Fault::Hang { applied: false },
            4 => Fault::Hang { applied: true },
            _ => Fault::LostAnswer,
        })
    }

    fn more(&self) -> std::sync::MutexGuard<'_, fastrand::Rng> {
        self.more.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Which entries of a batch call that goes through fail on their own.
    fn entry_faults(&self, entries: usize) -> Vec<bool> {
        if self.workload.entry_fault_rate == 0.0 || !self.workload.faulty_at(self.record.elapsed())
        {
            return vec![false; entries];
        }
        let mut more = self.more();
        (0..entries)
            .map(|_| more.f64() < self.workload.entry_fault_rate)
            .collect()
    }

    /// Notes a call of `action` on `entries` (the attempt named by `attempt`, if any) as it
    /// starts; returns its number.
    fn note_call(
        &self,
        action: Action,
        entries: Vec<(String, u32)>,
        attempt: Option<String>,
    ) -> u64 {
        let call = self.record.next_call();
        self.record.push(Event::Call(CallMade {
            consumer: self.consumer,
            call,
            action,
            entries,
            attempt,
        }));
        call
    }

    /// A call that opens the queue: fails transiently now and then (never in a liveness run,
    /// whose consumers must all start), else goes through.
    async fn open_call<T: Send>(
        &self,
        apply: impl Future<Output = Result<T, CallError>> + Send,
    ) -> Result<T, CallError> {
        let call = self.note_call(Action::Open, Vec::new(), None);
        let consumer = self.consumer;
        let faulted = self.workload.liveness.is_none() && self.more().f64() < self.fault_rate;
        let result = if faulted {
            self.record.push(Event::Faulted {
                consumer,
                call,
                fault: Fault::Server,
            });
            Err(CallError::new(CallErrorKind::Server, "internal error").with_code("InternalError"))
        } else {
            apply.await
        };
        let before = self.sqs.journal_len();
        self.record.push(Event::Answered {
            consumer,
            call,
            applied: (before, before),
            answer: match &result {
                Ok(_) => Answer::Entries(Vec::new()),
                Err(error) => Answer::Failed(error.to_string()),
            },
            in_flight: None,
        });
        result
    }

    /// Makes one call through the faults: `apply` is the call to SQS, `answer` what the record
    /// notes of its result.
    /// `late` is the same call made anew, for a fault that applies it after the client gave up.
    async fn call<T: Send>(
        &self,
        action: Action,
        entries: Vec<(String, u32)>,
        attempt: Option<String>,
        apply: impl Future<Output = Result<T, CallError>> + Send,
        late: impl Future<Output = ()> + Send + 'static,
        answer: impl Fn(&T) -> Answer + Send,
    ) -> Result<T, CallError> {
        let call = self.note_call(action, entries, attempt);
        let consumer = self.consumer;
        let fault = self.draw();
        if let Some(fault) = fault {
            self.record.push(Event::Faulted {
                consumer,
                call,
                fault,
            });
        }
        let before = self.sqs.journal_len();
        let result = match fault {
            None => apply.await,
            Some(Fault::Throttled) => Err(CallError::new(CallErrorKind::Throttled, "slow down")
                .with_code("ThrottlingException")),
            Some(Fault::Server) => {
                Err(CallError::new(CallErrorKind::Server, "internal error")
                    .with_code("InternalError"))
            }
            Some(Fault::Refused) => {
                Err(CallError::new(CallErrorKind::Network, "connection refused"))
            }
            Some(Fault::Hang { applied }) => {
                let deadline = tokio::time::Instant::now() + self.call_timeout;
                if applied {
                    // The answer is dropped; what SQS did stays done. (A long poll may still
                    // be waiting at the timeout: then nothing was applied.)
                    let _ = tokio::time::timeout_at(deadline, apply).await;
                }
                tokio::time::sleep_until(deadline).await;
                Err(CallError::new(
                    CallErrorKind::Network,
                    "no answer within the call timeout",
                ))
            }
            Some(Fault::AppliedLate) => {
                // SQS applies the call after the client has given up on it.
                let delay = Duration::from_millis(self.more().u64(..5_000));
                let timeout = self.call_timeout;
                let (record, sqs) = (self.record.clone(), self.sqs.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(timeout + delay).await;
                    let before = sqs.journal_len();
                    late.await;
                    record.push(Event::AppliedLate {
                        consumer,
                        call,
                        applied: (before, sqs.journal_len()),
                    });
                });
                tokio::time::sleep(timeout).await;
                Err(CallError::new(
                    CallErrorKind::Network,
                    "no answer within the call timeout",
                ))
            }
            Some(Fault::Outage(OutageKind::Throttled)) => {
                Err(CallError::new(CallErrorKind::Throttled, "rate exceeded")
                    .with_code("ThrottlingException"))
            }
            Some(Fault::Outage(OutageKind::Denied)) => Err(CallError::new(
                CallErrorKind::AccessDenied,
                "the key the queue is encrypted with refused access",
            )
            .with_code("KmsAccessDenied")),
            Some(Fault::LostAnswer) => {
                let _ = apply.await;
                Err(CallError::new(
                    CallErrorKind::Network,
                    "connection reset before the answer",
                ))
            }
        };
        let after = self.sqs.journal_len();
        let noted = match &result {
            Ok(value) => answer(value),
            Err(error) => Answer::Failed(error.to_string()),
        };
        let in_flight = (action == Action::Receive).then(|| {
            let held = self
                .stats
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .map_or(0, |stats| stats.snapshot().in_flight);
            (self.sqs.in_flight_receipts(&self.queue), held)
        });
        self.record.push(Event::Answered {
            consumer,
            call,
            applied: (before, after),
            answer: noted,
            in_flight,
        });
        result
    }
}

fn entry_answer(results: &[EntryResult]) -> Answer {
    Answer::Entries(
        results
            .iter()
            .map(|result| *result == EntryResult::Ok)
            .collect(),
    )
}

/// The entries of a batch call (receipt handle, seconds), owned: as the record notes them, and
/// as a late application replays them.
fn owned<'e>(entries: impl Iterator<Item = (&'e str, u32)>) -> Vec<(String, u32)> {
    entries
        .map(|(handle, seconds)| (handle.to_owned(), seconds))
        .collect()
}

impl SqsDecorator for FaultySqs {
    type Inner = InProcessSqs;

    fn inner(&self) -> &InProcessSqs {
        &self.sqs
    }

    fn queue_url<'a>(&'a self, queue_name: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(self.open_call(self.sqs.queue_url(queue_name)))
    }

    fn create_queue<'a>(
        &'a self,
        queue_name: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(self.open_call(self.sqs.create_queue(queue_name, attributes)))
    }

    fn queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
    ) -> BoxFuture<'a, Result<QueueAttributes, CallError>> {
        Box::pin(self.open_call(self.sqs.queue_attributes(queue_url)))
    }

    fn set_queue_attributes<'a>(
        &'a self,
        queue_url: &'a str,
        attributes: &'a [(&'a str, String)],
    ) -> BoxFuture<'a, Result<(), CallError>> {
        Box::pin(self.open_call(self.sqs.set_queue_attributes(queue_url, attributes)))
    }

    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        let late = {
            let sqs = self.sqs.clone();
            let url = request.queue_url.to_owned();
            let attempt = request.attempt_id.map(str::to_owned);
            let names: Vec<String> = request
                .system_attributes
                .iter()
                .map(|name| (*name).to_owned())
                .collect();
            let (max_messages, visibility_timeout) =
                (request.max_messages, request.visibility_timeout);
            async move {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                let request = ReceiveRequest {
                    queue_url: &url,
                    max_messages,
                    wait_time: Duration::ZERO,
                    visibility_timeout,
                    attempt_id: attempt.as_deref(),
                    system_attributes: &names,
                };
                let _ = sqs.receive(&request).await;
            }
        };
        Box::pin(self.call(
            Action::Receive,
            Vec::new(),
            request.attempt_id.map(str::to_owned),
            self.sqs.receive(request),
            late,
            |messages: &Vec<ReceivedMessage>| {
                Answer::Received(
                    messages
                        .iter()
                        .map(|message| {
                            let count = message
                                .attributes
                                .get("ApproximateReceiveCount")
                                .and_then(|count| count.parse().ok())
                                .unwrap_or(0);
                            (
                                message.message_id.clone(),
                                count,
                                message.receipt_handle.clone(),
                            )
                        })
                        .collect(),
                )
            },
        ))
    }

    fn delete_message_batch<'a>(
        &'a self,
        queue_url: &'a str,
        receipt_handles: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        let entries = owned(receipt_handles.iter().map(|handle| (*handle, 0)));
        let late = {
            let sqs = self.sqs.clone();
            let url = queue_url.to_owned();
            let handles: Vec<String> = receipt_handles.iter().map(|h| (*h).to_owned()).collect();
            async move {
                let handles: Vec<&str> = handles.iter().map(String::as_str).collect();
                let _ = sqs.delete_message_batch(&url, &handles).await;
            }
        };
        let faulted = self.entry_faults(receipt_handles.len());
        let apply = async move {
            let through: Vec<&str> = receipt_handles
                .iter()
                .zip(&faulted)
                .filter(|(_, faulted)| !**faulted)
                .map(|(handle, _)| *handle)
                .collect();
            let results = if through.is_empty() {
                Vec::new()
            } else {
                self.sqs.delete_message_batch(queue_url, &through).await?
            };
            Ok(merge(&faulted, results))
        };
        Box::pin(self.call(
            Action::Delete,
            entries,
            None,
            apply,
            late,
            |results: &Vec<EntryResult>| entry_answer(results),
        ))
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        let noted = owned(entries.iter().copied());
        let late = {
            let sqs = self.sqs.clone();
            let url = queue_url.to_owned();
            let replayed = noted.clone();
            async move {
                let entries: Vec<(&str, u32)> = replayed
                    .iter()
                    .map(|(handle, seconds)| (handle.as_str(), *seconds))
                    .collect();
                let _ = sqs.change_message_visibility_batch(&url, &entries).await;
            }
        };
        let faulted = self.entry_faults(entries.len());
        let apply = async move {
            let through: Vec<(&str, u32)> = entries
                .iter()
                .zip(&faulted)
                .filter(|(_, faulted)| !**faulted)
                .map(|(entry, _)| *entry)
                .collect();
            let results = if through.is_empty() {
                Vec::new()
            } else {
                self.sqs
                    .change_message_visibility_batch(queue_url, &through)
                    .await?
            };
            Ok(merge(&faulted, results))
        };
        Box::pin(self.call(
            Action::ChangeVisibility,
            noted,
            None,
            apply,
            late,
            |results: &Vec<EntryResult>| entry_answer(results),
        ))
    }
}

/// The results of a batch call whose `faulted` entries failed on their own, from the results
/// of the rest (in order).
fn merge(faulted: &[bool], through: Vec<EntryResult>) -> Vec<EntryResult> {
    let mut through = through.into_iter();
    faulted
        .iter()
        .map(|faulted| {
            if *faulted {
                EntryResult::Failed(EntryFailure {
                    code: "InternalError".to_owned(),
                    sender_fault: false,
                    message: Some("an entry failed on its own".to_owned()),
                })
            } else {
                through.next().unwrap_or(EntryResult::Ok)
            }
        })
        .collect()
}
