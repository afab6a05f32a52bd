//! One opened queue: its URL and attributes, its metrics, its settlement state.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use crate::api::{CallError, CallErrorKind, QueueAttributes, SqsApi};
use crate::error::Error;
use crate::health::HealthCells;
use crate::metrics::{Action, QueueMetrics, StatsCells};
use crate::queue_url::{is_url, name_of};
use crate::receive::worker_capacity::WorkerCapacity;
use crate::settle::coalescer::CoalescerConfig;
use crate::settle::heartbeat::HeartbeatConfig;
use crate::settle::{Answers, DeleteFill, Settler, SettlerConfig};
use crate::sqs::backoff::Backoff;
use crate::sqs::redrive_policy::{RedrivePolicy, RedriveWrite};
use crate::sqs::retry;
use crate::sqs::round_trip::RoundTrip;

/// SQS's default visibility timeout, used when the queue does not say.
const DEFAULT_VISIBILITY_SECS: u32 = 30;

/// Everything the tasks of one queue share.
pub(crate) struct QueueRuntime {
    /// The queue's name, for logs and metric labels.
    pub(crate) name: Arc<str>,
    pub(crate) url: String,
    pub(crate) api: Arc<dyn SqsApi>,
    /// The visibility timeout each receive asks for, in seconds.
    pub(crate) visibility_timeout: u32,
    /// With the heartbeat off and a visibility timeout above zero, the visibility timeout: how
    /// long a received message may wait before SQS hands it out again (see
    /// [`lapse_bound`](crate::receive::lapse_bound)). `None` otherwise.
    pub(crate) lapse_window: Option<Duration>,
    /// The redrive policy's `maxReceiveCount` when the engine declared one: a drop at this
    /// receive count returns the message instead of deleting it.
    pub(crate) max_receive_count: Option<u32>,
    pub(crate) metrics: Arc<QueueMetrics>,
    /// The queue's settlement and heartbeat.
    pub(crate) settler: Arc<Settler>,
    /// Whether it is a FIFO queue.
    pub(crate) fifo: bool,
    /// How a message is settled when its handler returns an error.
    pub(crate) on_handler_error: crate::handle::error_policy::HandlerErrorPolicy,
    /// The handlers' deadline and the heartbeat's cap.
    pub(crate) processing: crate::handle::processing_limit::ProcessingLimit,
    /// Whether the receivers may start receives.
    pub(crate) paused: crate::receive::pause::Paused,
    /// The round trip to SQS as measured on short calls.
    pub(crate) round_trip: Arc<RoundTrip>,
    /// Whether a batch handler was already warned of breaking a FIFO group's order.
    pub(crate) warned_batch_order: std::sync::atomic::AtomicBool,
    /// What the receivers say of their calls, for the engine's health view.
    pub(crate) health: Arc<HealthCells>,
    /// The queue's calls that failed in a way a retry may mend, which the settlement counts
    /// too.
    pub(crate) pressure: Arc<crate::sqs::pressure::Pressure>,
    /// How fast the workers could take messages, where the engine runs the handlers.
    pub(crate) capacity: WorkerCapacity,
    /// What becomes of bodies stored in S3.
    pub(crate) payloads: crate::large_payload::Payloads,
}

/// What opening a queue needs to know.
pub(crate) struct OpenOptions {
    pub(crate) queue: String,
    pub(crate) visibility_timeout: Option<u32>,
    pub(crate) backoff: Backoff,
    pub(crate) coalescer: CoalescerConfig,
    /// Whether the heartbeat runs, and its margin when not the default.
    pub(crate) heartbeat: Option<Option<Duration>>,
    /// The redrive policy to write onto the queue.
    pub(crate) redrive: Option<Redrive>,
    /// Create the queue, and its dead-letter queue, when missing.
    pub(crate) create_if_missing: bool,
    /// The engine's health view, which the receivers keep.
    pub(crate) health: Arc<HealthCells>,
    /// Whether whoever settles a delivery may wait for SQS's answer: a delete waits less for
    /// others to share its call when one may (see [`DeleteFill`]).
    pub(crate) answers: Answers,
}

/// A redrive policy: after `max_receive_count` receives, SQS moves a message to
/// `dead_letter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redrive {
    pub(crate) max_receive_count: u32,
    /// The dead-letter queue, by name or URL.
    pub(crate) dead_letter: String,
    /// Whether the policy may be written onto the queue.
    pub(crate) write: RedriveWrite,
}

impl QueueRuntime {
    /// Resolves the queue and reads its attributes.
    ///
    /// # Errors
    ///
    /// [`Error::QueueNotFound`] when the queue does not exist; [`Error::Open`] when a call
    /// failed otherwise (after retries, when the failure was transient).
    pub(crate) async fn open(
        api: Arc<dyn SqsApi>,
        options: OpenOptions,
        stats: Arc<StatsCells>,
    ) -> Result<(Self, QueueAttributes), Error> {
        let name: Arc<str> = Arc::from(name_of(&options.queue));
        let metrics = QueueMetrics::new(&name, stats);
        let round_trip = Arc::new(RoundTrip::default());
        let opener = Opener {
            api: &*api,
            backoff: &options.backoff,
            metrics: &metrics,
            round_trip: &round_trip,
            create_if_missing: options.create_if_missing,
        };
        let queue = &options.queue;
        let (url, attributes) = opener.resolve(queue, queue).await?;
        let existing = attributes
            .redrive_policy
            .as_deref()
            .and_then(RedrivePolicy::parse);
        let max_receive_count = match &options.redrive {
            Some(redrive) => {
                opener
                    .declare_redrive(queue, &url, attributes.fifo, redrive, existing.as_ref())
                    .await?;
                Some(redrive.max_receive_count)
            }
            None => existing.map(|policy| {
                // Declared by the infrastructure: a drop at its cap returns the message, so
                // that SQS moves it to its dead-letter queue instead of losing it.
                info!(queue = %name, policy = %policy, "adopting the queue's redrive policy");
                policy.max_receive_count
            }),
        };
        let visibility_timeout = options
            .visibility_timeout
            .or(attributes.visibility_timeout)
            .unwrap_or(DEFAULT_VISIBILITY_SECS);
        let metrics = Arc::new(metrics);
        let heartbeat = options.heartbeat.and_then(|margin| {
            HeartbeatConfig::for_visibility(
                Duration::from_secs(u64::from(visibility_timeout)),
                margin,
            )
        });
        let lapse_window = (heartbeat.is_none() && visibility_timeout > 0)
            .then(|| Duration::from_secs(u64::from(visibility_timeout)));
        let pressure = Arc::new(crate::sqs::pressure::Pressure::default());
        let settler = Arc::new(Settler::new(SettlerConfig {
            name: Arc::clone(&name),
            url: url.clone(),
            api: Arc::clone(&api),
            backoff: options.backoff,
            metrics: Arc::clone(&metrics),
            coalescer: options.coalescer,
            heartbeat,
            round_trip: Arc::clone(&round_trip),
            delete_fill: DeleteFill::for_queue(attributes.fifo, options.answers),
            health: Arc::clone(&options.health),
            pressure: Arc::clone(&pressure),
        }));
        let runtime = Self {
            name,
            url,
            api,
            visibility_timeout,
            lapse_window,
            max_receive_count,
            metrics,
            settler,
            fifo: attributes.fifo,
            on_handler_error: crate::handle::error_policy::HandlerErrorPolicy::default(),
            processing: crate::handle::processing_limit::ProcessingLimit::default(),
            paused: crate::receive::pause::Paused::default(),
            payloads: crate::large_payload::Payloads::default(),
            round_trip,
            warned_batch_order: std::sync::atomic::AtomicBool::new(false),
            health: options.health,
            pressure,
            capacity: WorkerCapacity::new(lapse_window.is_some()),
        };
        Ok((runtime, attributes))
    }
}

/// The calls that open a queue.
struct Opener<'a> {
    api: &'a dyn SqsApi,
    backoff: &'a Backoff,
    metrics: &'a QueueMetrics,
    round_trip: &'a RoundTrip,
    create_if_missing: bool,
}

impl Opener<'_> {
    /// The URL and attributes of `target` (a name or URL), creating it when allowed. Errors
    /// name `queue`, the queue being opened.
    async fn resolve(&self, queue: &str, target: &str) -> Result<(String, QueueAttributes), Error> {
        let open_error = |action: Action, source: CallError| match source.kind {
            CallErrorKind::QueueNotFound if queue == target => Error::QueueNotFound {
                queue: queue.to_owned(),
            },
            CallErrorKind::QueueNotFound => Error::DeadLetterQueueNotFound {
                queue: queue.to_owned(),
                dead_letter: target.to_owned(),
            },
            _ => Error::Open {
                queue: queue.to_owned(),
                action: action.as_str(),
                source,
            },
        };
        let url = if is_url(target) {
            target.to_owned()
        } else if self.create_if_missing {
            let fifo = target.ends_with(".fifo");
            let attributes: Vec<(&str, String)> = if fifo {
                vec![("FifoQueue", "true".to_owned())]
            } else {
                Vec::new()
            };
            self.call(Action::CreateQueue, || {
                self.api.create_queue(target, &attributes)
            })
            .await
            .map_err(|e| open_error(Action::CreateQueue, e))?
        } else {
            self.call(Action::GetQueueUrl, || self.api.queue_url(target))
                .await
                .map_err(|e| open_error(Action::GetQueueUrl, e))?
        };
        let attributes = self
            .call(Action::GetQueueAttributes, || {
                self.api.queue_attributes(&url)
            })
            .await
            .map_err(|e| open_error(Action::GetQueueAttributes, e))?;
        Ok((url, attributes))
    }

    /// Checks the dead-letter queue, and makes the queue's redrive policy the declared one:
    /// nothing to do when it is already, written (with a warning naming the difference) or
    /// refused, as [`Redrive::write`] says, when it is not.
    async fn declare_redrive(
        &self,
        queue: &str,
        url: &str,
        fifo: bool,
        redrive: &Redrive,
        existing: Option<&RedrivePolicy>,
    ) -> Result<(), Error> {
        let (_, dead_letter) = self.resolve(queue, &redrive.dead_letter).await?;
        if dead_letter.fifo != fifo {
            let kind = |fifo: bool| {
                if fifo {
                    "a FIFO queue"
                } else {
                    "a standard queue"
                }
            };
            return Err(Error::Misconfigured {
                queue: queue.to_owned(),
                reason: format!(
                    "it is {} but its dead-letter queue `{}` is {}: a FIFO queue takes a FIFO dead-letter queue, a standard queue a standard one",
                    kind(fifo),
                    redrive.dead_letter,
                    kind(dead_letter.fifo)
                ),
            });
        }
        let Some(arn) = dead_letter.arn else {
            return Err(Error::Misconfigured {
                queue: queue.to_owned(),
                reason: format!(
                    "the attributes of dead-letter queue `{}` carry no QueueArn",
                    redrive.dead_letter
                ),
            });
        };
        let declared = RedrivePolicy {
            dead_letter_arn: arn,
            max_receive_count: redrive.max_receive_count,
        };
        let found = existing.map_or_else(|| "none".to_owned(), ToString::to_string);
        match existing {
            Some(existing) if *existing == declared => return Ok(()),
            _ if redrive.write == RedriveWrite::Never => {
                return Err(Error::Misconfigured {
                    queue: queue.to_owned(),
                    reason: format!(
                        "its redrive policy is {found}, not the declared {declared}, and the engine does not write it (RedriveWrite::Never)"
                    ),
                });
            }
            Some(_) => {
                warn!(queue, found = %found, declared = %declared, "the queue's redrive policy differs from the declared one; writing the declared one");
            }
            None => {}
        }
        let attributes = [("RedrivePolicy", declared.to_json())];
        self.call(Action::SetQueueAttributes, || {
            self.api.set_queue_attributes(url, &attributes)
        })
        .await
        .map_err(|source| Error::Open {
            queue: queue.to_owned(),
            action: Action::SetQueueAttributes.as_str(),
            source,
        })
    }

    async fn call<'c, T, F, Fut>(&self, action: Action, call: F) -> Result<T, CallError>
    where
        F: FnMut() -> Fut + 'c,
        Fut: Future<Output = Result<T, CallError>> + 'c,
    {
        let started = tokio::time::Instant::now();
        // Each attempt is counted.
        let result = retry::retrying_observed(self.backoff, call, |result, attempt, again| {
            self.metrics.call(action, result.is_ok());
            if let (Err(error), true) = (result, again) {
                warn!(action = action.as_str(), attempt, error = %error, "call failed; retrying");
            }
        })
        .await;
        if result.is_ok() {
            // Retries included: an upper bound of the round trip, which is what a grace needs.
            self.round_trip.sample(started.elapsed());
        }
        result
    }
}

#[cfg(test)]
impl QueueRuntime {
    pub(crate) fn metrics_stats(&self) -> crate::metrics::Stats {
        self.metrics.snapshot()
    }
}
