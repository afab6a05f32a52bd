//! The broker's in-process mode, for the framework's `TestApp` on a paused clock (feature
//! `testing`).
//!
//! `TestApp::start` connects an [`SqsBroker`] through [`InProcess`] instead of `connect`: the
//! connected form is the production one, with the engine's receivers, coalescer and heartbeat,
//! on an [`InProcessSqs`] instead of a client. What that double models and leaves out is in
//! [`crate::testing`]; on top of it:
//!
//! - The credentials and [`api`](SqsBroker::api) of the broker are unused. Connections made
//!   on one thread with the same endpoint and region share their queues, as connections to one
//!   account do; a test runs on a thread of its own, so tests do not share them. Every queue
//!   the service names exists there: a publish to a queue nobody created is taken, where SQS
//!   refuses it (`ruststream_conformance.rs` pins that gap; the live suites cover a missing
//!   queue).
//! - Where a queue has several subscriptions, the oldest receives everything until it closes,
//!   so the harness knows which one a message reaches; on SQS they compete.
//! - The harness counts a message in flight from when it can be received on a queue some
//!   subscription reads until its settlement has been answered (or its delivery dropped), so
//!   `publish` returns once the reaction has settled. A `retry_after` comes back through
//!   `TestApp::advance`, which fires the redeliveries that fell due.
//! - Messages sent to a queue no subscription reads are kept, as SQS keeps them, and read back
//!   with `published`; they are not waited for.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ::ruststream::testing::{Backlog, Coordinator, InProcess, TestableBroker};
use ::ruststream::{OutgoingMessage, RawMessage};

use super::broker::SqsBroker;
use super::connection::{ConnectedSqsBroker, Core};
use super::error::SqsError;
use super::harness::{Harness, Held};
use super::message::decode;
use super::publish::SqsPublisher;
use super::queue::queue_name;
use crate::api::SqsApi;
use crate::publish::Services;
use crate::testing::{InProcessSqs, Observer};

/// An endpoint and a region, as the broker was given them.
type AccountKey = (Option<String>, Option<String>);

thread_local! {
    /// The in-process accounts of this thread, by endpoint and region. A test runs on a thread
    /// of its own, so tests do not share queues, while the connections one test makes do, as
    /// connections to one account would.
    static ACCOUNTS: RefCell<HashMap<AccountKey, InProcessSqs>> = RefCell::new(HashMap::new());
}

/// The harness's coordinator, as the double's observer.
struct Coordinated(Coordinator);

impl Observer for Coordinated {
    fn enqueued(&self) {
        self.0.enqueued();
    }

    fn consumed(&self) {
        self.0.consumed();
    }

    fn wake_after(&self, delay: Duration, wake: Box<dyn FnOnce() + Send>) {
        self.0.schedule_redelivery(delay, wake);
    }
}

impl Harness for InProcessSqs {
    fn watch(&self, queue: &str) -> (Arc<dyn SqsApi>, Held) {
        let watch = InProcessSqs::watch(self, queue);
        (Arc::new(watch.reader()), Box::new(watch))
    }

    fn claim(&self, message_id: &str, receive_count: u32) -> Option<Held> {
        InProcessSqs::claim(self, message_id, receive_count)
            .map(|counted| Box::new(counted) as Held)
    }

    #[cfg(feature = "sns")]
    fn subscribe_to_topic(&self, topic: &str, queue: &str) -> Result<(), String> {
        InProcessSqs::subscribe_to_topic(self, topic, queue).map_err(|error| error.to_string())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl InProcess for SqsBroker {
    /// A connected broker on a new [`InProcessSqs`], on the current runtime. Makes no I/O.
    ///
    /// # Errors
    ///
    /// [`SqsError::Config`] outside a tokio runtime.
    ///
    /// Clones of the broker connect through this connection while it is open, as they do
    /// through the one `connect` makes.
    async fn connect_in_process(self) -> Result<ConnectedSqsBroker, SqsError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| SqsError::Config(format!("connect outside a tokio runtime: {e}")))?;
        let sqs = ACCOUNTS.with_borrow_mut(|accounts| {
            accounts
                .entry(self.account())
                .or_insert_with(InProcessSqs::new)
                .clone()
        });
        let services = Services {
            sqs: Arc::new(sqs.clone()),
            #[cfg(feature = "sns")]
            sns: Some(Arc::new(sqs.clone())),
        };
        let mut core = Core::new(services, runtime);
        core.harness = Some(Arc::new(sqs));
        let connected = ConnectedSqsBroker {
            core: Arc::new(core),
            create_if_missing: self.create_if_missing,
        };
        self.keep_connection(&connected);
        Ok(connected)
    }
}

impl ConnectedSqsBroker {
    /// The in-process SQS the broker runs on, when the harness connected it so.
    fn in_process_sqs(&self) -> Option<&InProcessSqs> {
        self.core
            .harness
            .as_ref()?
            .as_any()
            .downcast_ref::<InProcessSqs>()
    }

    fn in_process(&self) -> &InProcessSqs {
        self.in_process_sqs().unwrap_or_else(|| {
            panic!("the broker is connected to SQS, not in process: the harness drives it live")
        })
    }
}

impl TestableBroker for ConnectedSqsBroker {
    fn install_coordinator(&self, coordinator: Coordinator) {
        // Live, SQS itself holds the messages and the harness waits on the subscriptions.
        if let Some(sqs) = self.in_process_sqs() {
            sqs.observe(Arc::new(Coordinated(coordinator)));
        }
    }

    /// Sends the message as a publish would, checked the same way.
    ///
    /// # Panics
    ///
    /// When SQS would refuse the message (an empty body, more than ten headers, an empty
    /// header value, over 1 MiB): a test's input has to be one SQS takes.
    fn inject(&self, message: OutgoingMessage<'_>) {
        let (name, payload, headers) = message.into_parts();
        let publisher = SqsPublisher::new(Arc::clone(&self.core));
        let sent = publisher
            .entry(name, payload.to_vec(), &headers, None)
            .and_then(|(target, entry, _)| {
                self.in_process()
                    .send_entry(&target, &entry)
                    .map_err(|error| SqsError::Refused {
                        destination: name.to_owned(),
                        reason: error.to_string(),
                    })
            });
        if let Err(error) = sent {
            panic!("SQS refuses this test message: {error}");
        }
    }

    /// Every message sent to the queue of `name`, in the order SQS took them, with its body
    /// and headers as a receiver decodes them.
    ///
    /// For a topic, every message published to it, as its subscribed queues received them.
    fn published(&self, name: &str) -> Vec<RawMessage> {
        let Some(sqs) = self.in_process_sqs() else {
            return Vec::new();
        };
        #[cfg(feature = "sns")]
        let sent = sqs
            .topic_published(&super::topic::topic_name(name))
            .unwrap_or_else(|| sqs.sent(&queue_name(name)));
        #[cfg(not(feature = "sns"))]
        let sent = sqs.sent(&queue_name(name));
        sent.into_iter()
            .map(|sent| {
                let attributes = sent.attributes.iter().map(|(name, value)| (name, value));
                let (payload, headers) = decode(
                    &sent.body,
                    attributes,
                    sent.attributes.len() + 1,
                    sent.group_id.as_deref(),
                );
                RawMessage::new(name.to_owned(), payload).with_headers(headers)
            })
            .collect()
    }

    /// SQS hands a message to one of the subscriptions of its queue; in process, always to the
    /// oldest one (see the module docs).
    ///
    /// A topic delivers to every subscription of the queues subscribed to it: through
    /// [`subscribe_queue_to_topic`](ConnectedSqsBroker::subscribe_queue_to_topic), or named
    /// by the policy's `fans_out_to`.
    fn routes(&self, destination: &str, subscriptions: &[&str]) -> Vec<usize> {
        #[cfg(feature = "sns")]
        if let Some(queues) = self
            .core
            .topic_queues(&super::topic::topic_name(destination))
        {
            let mut positions = Vec::new();
            for queue in queues {
                let queue = queue_name(&queue);
                if let Some(position) = subscriptions
                    .iter()
                    .position(|name| queue_name(name) == queue)
                {
                    positions.push(position);
                }
            }
            positions.sort_unstable();
            positions.dedup();
            return positions;
        }
        let queue = queue_name(destination);
        subscriptions
            .iter()
            .position(|name| queue_name(name) == queue)
            .into_iter()
            .collect()
    }

    /// A queue keeps what was sent to it before a subscription opened.
    fn backlog(&self) -> Backlog {
        Backlog::Delivered
    }
}

::ruststream::register_testable_broker!(SqsBroker);
