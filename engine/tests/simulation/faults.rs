//! The fault layer: an [`SqsApi`] between one consumer and the in-process SQS that draws, per
//! call and from the run's seed, whether the call goes through or fails: throttled, a 5xx,
//! connection refused, no answer within the call timeout (applied or not), or an answer lost
//! after SQS applied the request. It notes every call, fault and answer in the record.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use sqs_engine::{
    BoxFuture, CallError, CallErrorKind, EntryResult, ReceiveRequest, ReceivedMessage, SqsApi,
    SqsDecorator, StatsHandle,
};

use crate::record::{Action, Answer, Event, Fault, Record};

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
}

impl FaultySqs {
    fn draw(&self) -> Option<Fault> {
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        if rng.f64() >= self.fault_rate {
            return None;
        }
        Some(match rng.u8(..6) {
            0 => Fault::Throttled,
            1 => Fault::Server,
            2 => Fault::Refused,
            3 => Fault::Hang { applied: false },
            4 => Fault::Hang { applied: true },
            _ => Fault::LostAnswer,
        })
    }

    /// Makes one call through the faults: `apply` is the call to SQS, `answer` what the record
    /// notes of its result.
    async fn call<T: Send>(
        &self,
        action: Action,
        entries: Vec<(String, u32)>,
        attempt: Option<String>,
        apply: impl Future<Output = Result<T, CallError>> + Send,
        answer: impl Fn(&T) -> Answer + Send,
    ) -> Result<T, CallError> {
        let call = self.record.next_call();
        let consumer = self.consumer;
        self.record.push(Event::Call {
            consumer,
            call,
            action,
            entries,
            attempt,
        });
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

impl SqsDecorator for FaultySqs {
    type Inner = InProcessSqs;

    fn inner(&self) -> &InProcessSqs {
        &self.sqs
    }

    fn receive<'a>(
        &'a self,
        request: &'a ReceiveRequest<'a>,
    ) -> BoxFuture<'a, Result<Vec<ReceivedMessage>, CallError>> {
        Box::pin(self.call(
            Action::Receive,
            Vec::new(),
            request.attempt_id.map(str::to_owned),
            self.sqs.receive(request),
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
        let entries = receipt_handles
            .iter()
            .map(|handle| ((*handle).to_owned(), 0))
            .collect();
        Box::pin(self.call(
            Action::Delete,
            entries,
            None,
            self.sqs.delete_message_batch(queue_url, receipt_handles),
            |results: &Vec<EntryResult>| entry_answer(results),
        ))
    }

    fn change_message_visibility_batch<'a>(
        &'a self,
        queue_url: &'a str,
        entries: &'a [(&'a str, u32)],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, CallError>> {
        let noted = entries
            .iter()
            .map(|(handle, seconds)| ((*handle).to_owned(), *seconds))
            .collect();
        Box::pin(self.call(
            Action::ChangeVisibility,
            noted,
            None,
            self.sqs.change_message_visibility_batch(queue_url, entries),
            |results: &Vec<EntryResult>| entry_answer(results),
        ))
    }
}
