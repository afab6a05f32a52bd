//! A consumer through the RustStream broker: a subscription of the connected broker, on the
//! same fault layer, whose deliveries this loop hands to the workload's handlers as a service
//! would, settling them with the framework's `ack`, `nack` and `nack_after`. At its shutdown
//! moment it stops taking deliveries, waits for its handlers up to its timeout, and shuts the
//! broker down, which sends every settlement made.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ruststream::{Broker, ConnectedBroker, IncomingMessage, Subscriber};
use sqs_engine::ruststream::{SqsBroker, SqsMessage, SqsQueue};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::faults::FaultySqs;
use crate::handle::{PANIC_MARKER, handle};
use crate::record::{Event, Record};
use crate::stopped::Stopped;
use crate::workload::{ConsumerPlan, End, Workload};

/// Runs consumer `consumer` through the broker until its shutdown moment.
pub async fn consume(
    consumer: usize,
    api: FaultySqs,
    record: Record,
    workload: Arc<Workload>,
    plan: ConsumerPlan,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Stopped {
    let broker = match SqsBroker::new().api(api).connect().await {
        Ok(broker) => broker,
        Err(error) => return stopped(&record, consumer, format!("connect: {error}")),
    };
    let mut queue = SqsQueue::new(workload.queue.clone())
        .receivers(plan.receivers)
        .max_in_flight(plan.workers)
        .wait(plan.wait_time)
        .visibility(Duration::from_secs(u64::from(plan.visibility)))
        .heartbeat(plan.heartbeat)
        .batch_window(plan.max_batch_wait)
        .create_if_missing();
    if let Some((dead_letter, receives)) = &workload.redrive
        && let Some(receives) = NonZeroU32::new(*receives)
    {
        queue = queue.redrive(receives, dead_letter.clone());
    }
    let mut subscriber = match broker.subscribe_queue(queue).await {
        Ok(subscriber) => subscriber,
        Err(error) => return stopped(&record, consumer, format!("subscribe: {error}")),
    };
    let workers = Arc::new(Semaphore::new(plan.workers));
    let mut handlers = JoinSet::new();
    tokio::pin!(shutdown);
    {
        let stream = subscriber.stream();
        tokio::pin!(stream);
        loop {
            let message = tokio::select! {
                biased;
                () = &mut shutdown => break,
                message = stream.next() => message,
            };
            let Some(Ok(message)) = message else {
                break;
            };
            let permit = tokio::select! {
                biased;
                () = &mut shutdown => {
                    // Dropped unsettled: it comes back when its visibility lapses.
                    record.push(Event::LetGo {
                        consumer,
                        message_id: message.message_id().to_owned(),
                        receive_count: receive_count_of(&message),
                    });
                    break;
                }
                permit = Arc::clone(&workers).acquire_owned() => permit,
            };
            let Ok(permit) = permit else {
                break;
            };
            let record = record.clone();
            let workload = Arc::clone(&workload);
            let visibility = plan.visibility;
            handlers.spawn(async move {
                let _permit = permit;
                let message_id = message.message_id().to_owned();
                let receive_count = receive_count_of(&message);
                let body = String::from_utf8_lossy(message.payload()).into_owned();
                // A handler cut short at the shutdown timeout drops its delivery unsettled.
                let mut cut = CutShort {
                    record: record.clone(),
                    consumer,
                    message_id: message_id.clone(),
                    receive_count,
                    ended: false,
                };
                let end = handle(
                    consumer,
                    &record,
                    &workload,
                    visibility,
                    message_id,
                    receive_count,
                    &body,
                )
                .await;
                cut.ended = true;
                // The answer comes back with the settlement; a failed one is the engine's to
                // log, and the invariants read what SQS applied.
                let _ = match end {
                    End::Ack => message.ack().await,
                    End::Drop => message.nack(false).await,
                    End::Retry | End::Fail => message.nack(true).await,
                    End::RetryAfter(delay) => message.nack_after(delay).await,
                    End::Panic => std::panic::panic_any(PANIC_MARKER),
                };
            });
        }
    }
    record.push(Event::ShutdownSignalled { consumer });
    let waited = tokio::time::timeout(plan.shutdown_timeout, async {
        while handlers.join_next().await.is_some() {}
    })
    .await;
    if waited.is_err() {
        handlers.abort_all();
        while handlers.join_next().await.is_some() {}
    }
    drop(subscriber);
    let detail = match broker.shutdown().await {
        Ok(()) => "broker shut down".to_owned(),
        Err(error) => format!("broker shutdown: {error}"),
    };
    stopped(&record, consumer, detail)
}

/// A handler under way: dropped before it ends (aborted at the shutdown timeout), it records
/// that the consumer let go of its delivery, which the subscription no longer holds.
struct CutShort {
    record: Record,
    consumer: usize,
    message_id: String,
    receive_count: u32,
    /// The handler ended (and recorded so).
    ended: bool,
}

impl Drop for CutShort {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        self.record.push(Event::LetGo {
            consumer: self.consumer,
            message_id: std::mem::take(&mut self.message_id),
            receive_count: self.receive_count,
        });
    }
}

/// The receive count the broker's message carries (0 when it carries none).
fn receive_count_of(message: &SqsMessage) -> u32 {
    message
        .redelivery_count()
        .and_then(|count| u32::try_from(count).ok())
        .unwrap_or(0)
}

fn stopped(record: &Record, consumer: usize, detail: String) -> Stopped {
    record.push(Event::Stopped { consumer, detail });
    Stopped {
        at: record.elapsed(),
        stats: None,
        healthy: None,
    }
}
