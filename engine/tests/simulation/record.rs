//! What the harness saw happen, in order: each consumer's calls and the faults put in them, the
//! answers the engine got, the handler calls and their ends, shutdown. Each event carries the
//! time on tokio's clock and the length of the in-process SQS's journal at that moment, so
//! that it can be placed among the changes SQS applied.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use sqs_engine::testing::InProcessSqs;
use tokio::time::Instant;

use crate::workload::End;

/// The calls the fault layer sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Receive,
    Delete,
    ChangeVisibility,
    /// A call that opens the queue: `GetQueueUrl`, `CreateQueue`, `GetQueueAttributes`,
    /// `SetQueueAttributes`.
    Open,
}

/// How the fault layer treats one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Throttled, not applied.
    Throttled,
    /// A 5xx, not applied.
    Server,
    /// Connection refused, not applied.
    Refused,
    /// No answer within the call timeout; applied first when `applied`.
    Hang { applied: bool },
    /// Applied, and the answer lost on the way back.
    LostAnswer,
    /// No answer within the call timeout, and applied after it, once the client gave up.
    AppliedLate,
    /// Failed as every call of an outage does.
    Outage(crate::workload::OutageKind),
}

/// What the engine got back from a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Messages, each as message id, receive count and receipt handle.
    Received(Vec<(String, u32, String)>),
    /// One result per entry: whether SQS applied it.
    Entries(Vec<bool>),
    /// The call failed.
    Failed(String),
}

/// A call a consumer made to SQS, as it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallMade {
    pub consumer: usize,
    /// The call's number.
    pub call: u64,
    pub action: Action,
    /// The receipt handles of a batch call with the seconds of each visibility entry (zero for
    /// a delete).
    pub entries: Vec<(String, u32)>,
    /// A FIFO receive's `ReceiveRequestAttemptId`.
    pub attempt: Option<String>,
}

/// One thing that happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A consumer called SQS.
    Call(CallMade),
    Faulted {
        consumer: usize,
        call: u64,
        fault: Fault,
    },
    /// The engine got its answer; SQS applied the journal's entries `applied.0..applied.1`
    /// during the call.
    Answered {
        consumer: usize,
        call: u64,
        applied: (usize, usize),
        answer: Answer,
        /// For a receive: the receipt handles SQS has in flight once it answered, and the
        /// engine's own count of the messages it holds.
        in_flight: Option<(Vec<String>, u64)>,
    },
    Started {
        consumer: usize,
        message_id: String,
        receive_count: u32,
    },
    Ended {
        consumer: usize,
        message_id: String,
        receive_count: u32,
        end: End,
    },
    ShutdownSignalled {
        consumer: usize,
    },
    /// The consumer let go of a delivery it held without settling it (one waiting for a
    /// worker when its shutdown came, or one whose handler was cut short at the shutdown
    /// timeout): the engine no longer holds it, and SQS hands it out again once its
    /// visibility lapses.
    #[cfg_attr(
        not(feature = "ruststream"),
        expect(dead_code, reason = "only the broker's consumers let go of a delivery")
    )]
    LetGo {
        consumer: usize,
        message_id: String,
        receive_count: u32,
    },
    /// SQS applied call `call`, which the consumer had given up on, now: the journal's entries
    /// `applied.0..applied.1`.
    AppliedLate {
        consumer: usize,
        call: u64,
        applied: (usize, usize),
    },
    Stopped {
        consumer: usize,
        detail: String,
    },
    /// The queue was deleted: SQS refuses every call naming it from now on.
    QueueDeleted,
    /// A settlement through the pull API failed, with this error and its sources.
    SettleFailed {
        consumer: usize,
        message_id: String,
        receive_count: u32,
        error: String,
    },
}

impl Event {
    /// The consumer, message id and receive count of a handler's start, as the event holds
    /// them; `None` for any other event.
    pub fn started(&self) -> Option<(&usize, &String, &u32)> {
        match self {
            Self::Started {
                consumer,
                message_id,
                receive_count,
            } => Some((consumer, message_id, receive_count)),
            _ => None,
        }
    }
}

/// An event, with when it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamped {
    /// Since the run began, on tokio's clock.
    pub at: Duration,
    /// The journal's length when it happened: the SQS changes before it.
    pub journal: usize,
    pub event: Event,
}

/// The events of one run, shared by the fault layers, the handlers and the run itself.
#[derive(Clone)]
pub struct Record {
    inner: Arc<Inner>,
}

struct Inner {
    sqs: InProcessSqs,
    start: Instant,
    events: Mutex<Vec<Stamped>>,
    calls: Mutex<u64>,
}

impl Record {
    pub fn new(sqs: InProcessSqs) -> Self {
        Self {
            inner: Arc::new(Inner {
                sqs,
                start: Instant::now(),
                events: Mutex::new(Vec::new()),
                calls: Mutex::new(0),
            }),
        }
    }

    fn events(&self) -> MutexGuard<'_, Vec<Stamped>> {
        self.inner
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A number for a new call.
    pub fn next_call(&self) -> u64 {
        let mut calls = self
            .inner
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *calls += 1;
        *calls
    }

    /// Notes `event` as happening now.
    pub fn push(&self, event: Event) {
        let stamped = Stamped {
            at: self.elapsed(),
            journal: self.inner.sqs.journal_len(),
            event,
        };
        self.events().push(stamped);
    }

    /// The time since the run began.
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(self.inner.start)
    }

    /// When the run began.
    pub fn start(&self) -> Instant {
        self.inner.start
    }

    /// Every event so far.
    pub fn snapshot(&self) -> Vec<Stamped> {
        self.events().clone()
    }
}
