//! [`SqsBroker`] and its connected form.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use ::ruststream::{
    Broker, BrokerMoves, ConnectedBroker, DeclareRetryError, DefaultPublish, RetryDeclaration,
    Subscribe, SubscriptionSource,
};
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_sqs::config::Credentials;
use tracing::info;

use super::connection::{ConnectedSqsBroker, Core, SharedConnection};
use super::error::SqsError;
use super::publish::{SqsPublish, SqsPublisher};
use super::queue::{SqsQueue, check_redrive, queue_name};
use super::subscriber::SqsSubscriber;
use crate::api::SqsApi;
use crate::engine::Engine;
use crate::handle::system_attributes::SystemAttributes;
use crate::publish::Services;
use crate::receive::consumer::ConsumerHandle;
use crate::sqs::aws::AwsSqs;

/// The SQS broker for RustStream, on the engine: settlements and heartbeats go out in batch
/// calls shared by the deliveries of a queue, and publishes in `SendMessageBatch` calls.
///
/// Making one does no I/O: the client is built, and the runtime kept, when the app connects
/// it. Every background task (receivers, settlement flusher, heartbeat, publish drivers) runs
/// on the runtime that connected it.
///
/// ```
/// use sqs_engine::prelude::*;
///
/// let broker = SqsBroker::new()
///     .endpoint("http://localhost:4566")
///     .region("us-east-1")
///     .test_credentials();
/// # let _ = broker;
/// ```
///
/// Without [`endpoint`](Self::endpoint), [`region`](Self::region) or an
/// [`SdkConfig`](Self::from_config), `aws-config` resolves them from the environment
/// (`AWS_REGION`, `AWS_ENDPOINT_URL`, profiles, instance roles).
#[derive(Clone, Default)]
#[must_use]
pub struct SqsBroker {
    endpoint: Option<String>,
    region: Option<String>,
    test_credentials: bool,
    pub(crate) create_if_missing: bool,
    confirm_settlements: bool,
    sdk_config: Option<SdkConfig>,
    api: Option<Arc<dyn SqsApi>>,
    #[cfg(feature = "s3")]
    large_payloads: Option<crate::LargePayloads>,
    /// The connection of this broker and its clones: a clone connects through it while it is
    /// open, so a startup hook holding a clone wires what the app's own connection uses.
    connection: SharedConnection,
}

impl std::fmt::Debug for SqsBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsBroker")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("test_credentials", &self.test_credentials)
            .field("create_if_missing", &self.create_if_missing)
            .field("confirm_settlements", &self.confirm_settlements)
            .field("sdk_config", &self.sdk_config.is_some())
            .field("api", &self.api.is_some())
            .finish()
    }
}

impl SqsBroker {
    /// A broker configured from the environment when it connects.
    pub fn new() -> Self {
        Self::default()
    }

    /// A broker on an `aws-config` [`SdkConfig`] (credentials, region, endpoint). The
    /// broker's own [`endpoint`](Self::endpoint), [`region`](Self::region) and
    /// [`test_credentials`](Self::test_credentials) win over it.
    pub fn from_config(config: SdkConfig) -> Self {
        Self {
            sdk_config: Some(config),
            ..Self::default()
        }
    }

    /// The SQS endpoint, such as `http://localhost:4566` for LocalStack.
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// The AWS region.
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Fixed `test`/`test` credentials, for LocalStack and other emulators. Never for AWS.
    pub fn test_credentials(mut self) -> Self {
        self.test_credentials = true;
        self
    }

    /// Subscriptions by bare name (`#[subscriber("orders")]`) create their queue, and its
    /// dead-letter queue, when missing, as [`SqsQueue::create_if_missing`] does. Default off:
    /// a missing queue stops the service at startup.
    pub fn create_if_missing(mut self) -> Self {
        self.create_if_missing = true;
        self
    }

    /// `ack`, `nack` and `nack_after` resolve once SQS has answered the settlement, with its
    /// answer, rather than once it is queued for its batch call: for a service whose next step (an `and_after` continuation, say) must run only
    /// after SQS applied the settlement, and which learns of a refused one from the
    /// settlement's error. Default off: a handler's worker moves on to the next delivery while
    /// the call is under way, and a settlement SQS refuses is logged with the message id and
    /// counted (`sqs_engine_settlements_total`), as the native API does it.
    pub fn confirm_settlements(mut self) -> Self {
        self.confirm_settlements = true;
        self
    }

    /// Bodies too large for SQS go through S3, as AWS's extended client libraries send them:
    /// the subscriptions fetch a pointer's body before the handler sees the message, and the
    /// publishers store a body over the threshold in the bucket (see
    /// [`LargePayloads`](crate::LargePayloads)).
    #[cfg(feature = "s3")]
    pub fn large_payloads(mut self, payloads: crate::LargePayloads) -> Self {
        self.large_payloads = Some(payloads);
        self
    }

    /// Talks to SQS through any [`SqsApi`] instead of a client of its own: a wrapper that
    /// observes the calls, or a stand-in. The endpoint, region and credentials are then unused.
    pub fn api(mut self, api: impl SqsApi) -> Self {
        self.api = Some(Arc::new(api));
        self
    }

    /// The endpoint the broker was given.
    #[cfg(feature = "asyncapi")]
    pub(crate) fn endpoint_url(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    /// The region the broker was given.
    #[cfg(feature = "asyncapi")]
    pub(crate) fn region_name(&self) -> Option<&str> {
        self.region.as_deref()
    }

    /// The `aws-config` settings the broker was made from.
    #[cfg(feature = "asyncapi")]
    pub(crate) fn sdk_config(&self) -> Option<&SdkConfig> {
        self.sdk_config.as_ref()
    }

    /// What an in-process connection is told apart by: connections of the same endpoint and
    /// region (on one thread) share their queues, as connections to one account do.
    #[cfg(feature = "testing")]
    pub(crate) fn account(&self) -> (Option<String>, Option<String>) {
        (self.endpoint.clone(), self.region.clone())
    }

    /// A publisher to any queue through this broker's connection, made before the broker
    /// connects: for code outside the handlers (an HTTP endpoint taking orders, say) that
    /// publishes while the service runs. It sends through whichever connection the broker (or
    /// a clone of it) holds when it publishes; before the broker connects and after it shut
    /// down, a publish is refused with [`SqsError::NotConnected`].
    pub fn publisher(&self) -> SqsPublisher {
        SqsPublisher::of_broker(Arc::clone(&self.connection))
    }

    /// The open connection of this broker or a clone of it, if there is one.
    pub(crate) fn open_connection(&self) -> Option<ConnectedSqsBroker> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .filter(|connected| !connected.core.is_closed())
            .cloned()
    }

    /// Keeps `connected` as the connection of this broker and its clones.
    pub(crate) fn keep_connection(&self, connected: &ConnectedSqsBroker) {
        *self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(connected.clone());
    }

    async fn build_services(self) -> Services {
        let config = match (&self.sdk_config, &self.api) {
            (Some(config), _) => config.clone(),
            // SQS calls go through the given api: nothing is resolved from the environment (no
            // profile read, no instance metadata call); an SNS client gets what was set.
            (None, Some(_)) => SdkConfig::builder()
                .behavior_version(BehaviorVersion::latest())
                .build(),
            (None, None) => {
                // What the broker was given is not looked for: no profile read or instance
                // metadata call for a region or credentials that are set.
                let mut loader = aws_config::defaults(BehaviorVersion::latest());
                if let Some(endpoint) = &self.endpoint {
                    loader = loader.endpoint_url(endpoint);
                }
                if let Some(region) = &self.region {
                    loader = loader.region(Region::new(region.clone()));
                }
                if self.test_credentials {
                    loader = loader.test_credentials();
                }
                loader.load().await
            }
        };
        let sqs: Arc<dyn SqsApi> = match self.api {
            Some(api) => api,
            None => {
                let mut builder = crate::sqs::aws::client_config(&config);
                if let Some(endpoint) = &self.endpoint {
                    builder = builder.endpoint_url(endpoint);
                }
                if let Some(region) = &self.region {
                    builder = builder.region(Region::new(region.clone()));
                }
                if self.test_credentials {
                    builder = builder
                        .credentials_provider(Credentials::new("test", "test", None, None, "test"));
                }
                Arc::new(AwsSqs::new(aws_sdk_sqs::Client::from_conf(builder.build())))
            }
        };
        #[cfg(feature = "sns")]
        let sns = {
            let mut builder = crate::sqs::aws_sns::client_config(&config);
            if let Some(endpoint) = &self.endpoint {
                builder = builder.endpoint_url(endpoint);
            }
            if let Some(region) = &self.region {
                builder = builder.region(aws_sdk_sns::config::Region::new(region.clone()));
            }
            if self.test_credentials {
                builder = builder.credentials_provider(aws_sdk_sns::config::Credentials::new(
                    "test", "test", None, None, "test",
                ));
            }
            Arc::new(crate::sqs::aws_sns::AwsSns::new(builder))
        };
        Services {
            sqs,
            #[cfg(feature = "sns")]
            sns: Some(sns),
        }
    }
}

impl From<SdkConfig> for SqsBroker {
    fn from(config: SdkConfig) -> Self {
        Self::from_config(config)
    }
}

impl Broker for SqsBroker {
    type Error = SqsError;
    type Connected = ConnectedSqsBroker;

    /// Builds the client and keeps the current runtime for the broker's tasks. Makes no call
    /// on SQS: queues are resolved when subscribed to or published to.
    ///
    /// A clone of a broker whose connection is open connects through that connection.
    async fn connect(self) -> Result<ConnectedSqsBroker, SqsError> {
        if let Some(connected) = self.open_connection() {
            return Ok(connected);
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| SqsError::Config(format!("connect outside a tokio runtime: {e}")))?;
        let create_if_missing = self.create_if_missing;
        let confirm_settlements = self.confirm_settlements;
        let shared = self.clone();
        #[cfg(feature = "s3")]
        let large_payloads = self.large_payloads.clone();
        let services = self.build_services().await;
        let mut core = Core::new(services, runtime);
        core.confirm_settlements = confirm_settlements;
        #[cfg(feature = "s3")]
        {
            core.large_payloads = large_payloads.map(Arc::new);
        }
        let connected = ConnectedSqsBroker {
            core: Arc::new(core),
            create_if_missing,
        };
        shared.keep_connection(&connected);
        Ok(connected)
    }
}

/// How long a shutdown waits, once the receivers stopped, for the subscribers and deliveries
/// still held: handlers finishing, subscribers being dropped. Short, because the framework's
/// own shutdown has already waited for its handlers by then. It does not bound the settlement's
/// own calls, which are waited for once the holders are gone.
const SETTLEMENT_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

impl ConnectedSqsBroker {
    /// A publisher to any queue, by the name each message carries.
    pub fn publisher(&self) -> SqsPublisher {
        SqsPublisher::new(Arc::clone(&self.core))
    }

    /// Opens a subscription: resolves (or creates) the queue, writes its redrive policy, and
    /// starts its receivers, settlement and heartbeat on the broker's runtime.
    ///
    /// # Errors
    ///
    /// [`SqsError::IncompleteRedrive`] for half a redrive policy; [`SqsError::InvalidQueue`]
    /// for a setting out of range; [`SqsError::Queue`] when the queue or its dead-letter queue
    /// is missing or cannot be opened; [`SqsError::Subscribe`] when the engine refuses the
    /// settings for another reason; [`SqsError::NotConnected`] after shutdown.
    pub async fn subscribe_queue(&self, queue: SqsQueue) -> Result<SqsSubscriber, SqsError> {
        if self.core.is_closed() {
            return Err(SqsError::NotConnected);
        }
        queue.validate()?;
        let name = queue.queue.clone();
        let subscribe_error = |source: crate::Error| match source {
            crate::Error::QueueNotFound { .. }
            | crate::Error::Open { .. }
            | crate::Error::DeadLetterQueueNotFound { .. } => SqsError::Queue {
                name: name.clone(),
                source: Box::new(source),
            },
            source => SqsError::Subscribe {
                queue: name.clone(),
                source: Box::new(source),
            },
        };
        // In process, the queue is watched before its receivers start, so that nothing they
        // receive escapes the harness's count, and the subscription receives as itself.
        let watch = self.core.watch(&queue_name(&queue.queue));
        let builder = match &watch {
            Some((reader, _)) => Engine::builder().api(Arc::clone(reader)),
            None => Engine::builder().api(Arc::clone(&self.core.api)),
        };
        let watch = watch.map(|(_, watch)| watch);
        let mut builder = builder
            .queue(queue_name(&queue.queue).into_owned())
            .receivers(queue.receivers)
            .workers(queue.max_in_flight)
            // Handed out and unsettled, plus the receives ahead of the workers: the cap the
            // subscription promises.
            .max_held(
                queue
                    .max_in_flight
                    .saturating_add(queue.receivers.saturating_mul(10)),
            )
            .wait_time(queue.wait)
            // Every system attribute SQS has, as ruststream-sqs-sns asks for them.
            .system_attributes(SystemAttributes::All)
            .heartbeat(queue.heartbeat)
            .create_if_missing(queue.create_if_missing);
        if let Some(visibility) = queue.visibility_secs() {
            builder = builder.visibility_timeout(visibility);
        }
        #[cfg(feature = "s3")]
        if let Some(payloads) = &self.core.large_payloads {
            builder = builder.large_payloads(crate::LargePayloads::clone(payloads));
        }
        if let Some(rate) = queue.receive_rate() {
            builder = builder.max_receive_rate(rate);
        }
        if let (Some(attempts), Some(dead_letter)) = (queue.max_attempts, &queue.dead_letter) {
            builder = builder
                .max_attempts(attempts.get())
                .dead_letter(queue_name(dead_letter).into_owned());
        }
        let engine = builder.build().map_err(subscribe_error)?;
        // Opened on the broker's runtime, so that the client's connections live there and not
        // on a caller's runtime that may stop.
        let runtime = self.core.runtime.clone();
        let consumer = self
            .core
            .runtime
            .spawn(async move { engine.consumer_on(&runtime).await })
            .await
            .map_err(|e| SqsError::Config(format!("the broker's runtime stopped: {e}")))?
            .map_err(subscribe_error)?;
        self.core
            .consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(consumer.handle());
        let subscriber = SqsSubscriber::new(consumer, Arc::clone(&self.core), queue.batch_window);
        Ok(subscriber.watching(watch))
    }
}

impl ConnectedBroker for ConnectedSqsBroker {
    type Error = SqsError;
    type Closed = ();

    /// Refuses new publishes and subscriptions, sends every publish already made and waits
    /// for SQS's answers, and stops every subscription's receivers. A subscription's
    /// settlement and heartbeat stay open until its subscriber is dropped and each delivery
    /// it handed out is settled or dropped, whatever the order: a handler still running acks
    /// through it, and the messages a subscriber received but did not hand out go back at
    /// once (visibility 0) when it is dropped, as does what a long poll the shutdown cut short
    /// brings. Then every settlement is sent and answered, and this returns.
    ///
    /// It waits for those subscribers and deliveries for a grace of three seconds after the
    /// receivers stopped. A subscription whose holders went within it is waited for to the
    /// end: every settlement sent and answered, however long its calls and their retries take
    /// (a settlement queued behind a call in flight included). A subscription still held
    /// after the grace keeps its settlement open until its last holder goes, so a settlement
    /// made later still takes effect while the broker's runtime runs.
    async fn shutdown(self) -> Result<(), SqsError> {
        self.core.closed.store(true, Ordering::Release);
        self.core.publisher.close().await;
        let consumers: Vec<ConsumerHandle> = std::mem::take(
            &mut *self
                .core
                .consumers
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        futures::future::join_all(
            consumers
                .iter()
                .map(|consumer| consumer.release_within(SETTLEMENT_GRACE)),
        )
        .await;
        // The subscriptions no longer receive: in process, nor do they hold the queue.
        self.core.end_watches();
        info!("sqs broker shut down");
        Ok(())
    }
}

impl Subscribe for ConnectedSqsBroker {
    type Subscriber = SqsSubscriber;
    type Copies = BrokerMoves;

    /// Subscribes to the queue of that name, with the redrive policy declared for it.
    fn subscribe(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<SqsSubscriber, SqsError>> + Send {
        let mut queue = SqsQueue::new(name);
        if self.create_if_missing {
            queue = queue.create_if_missing();
        }
        if let Some((attempts, dead_letter)) = self.core.redrive_of(name) {
            queue = queue.redrive(attempts, dead_letter);
        }
        self.subscribe_queue(queue)
    }

    /// Checks that `max_attempts(..)` and `dead_letter(..)` come together, and keeps them for
    /// the subscription to write as the queue's redrive policy.
    fn declare_retry(
        &self,
        name: &str,
        declaration: &RetryDeclaration,
    ) -> Result<(), DeclareRetryError> {
        check_redrive(name, declaration.max_attempts(), declaration.dead_letter())
            .map_err(|e| DeclareRetryError::Broker(Box::new(e)))?;
        let mut redrives = self
            .core
            .redrives
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match (declaration.max_attempts(), declaration.dead_letter()) {
            (Some(attempts), Some(dead_letter)) => {
                redrives.insert(name.to_owned(), (attempts, dead_letter.to_owned()));
            }
            _ => {
                redrives.remove(name);
            }
        }
        Ok(())
    }
}

impl SubscriptionSource<ConnectedSqsBroker> for SqsQueue {
    type Subscriber = SqsSubscriber;
    type Copies = BrokerMoves;

    fn name(&self) -> &str {
        &self.queue
    }

    fn subscribe(
        self,
        connected: &ConnectedSqsBroker,
    ) -> impl Future<Output = Result<Self::Subscriber, SqsError>> + Send {
        connected.subscribe_queue(self)
    }

    /// Records the mount site's `max_attempts(..)` and `dead_letter(..)`; the subscription
    /// checks them and writes them onto the queue as its redrive policy when it opens.
    fn declare_retry(mut self, declaration: &RetryDeclaration) -> Self {
        self.max_attempts = declaration.max_attempts();
        self.dead_letter = declaration.dead_letter().map(str::to_owned);
        self
    }

    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self) -> ::ruststream::asyncapi::Bindings {
        super::bindings::queue_channel_bindings(self)
    }
}

impl DefaultPublish for ConnectedSqsBroker {
    type Policy = SqsPublish;
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use ::ruststream::PublishPolicy;

    use super::*;

    async fn connected() -> ConnectedSqsBroker {
        SqsBroker::new()
            .endpoint("http://127.0.0.1:9")
            .region("us-east-1")
            .test_credentials()
            .connect()
            .await
            .expect("connect makes no call")
    }

    fn stashed(connected: &ConnectedSqsBroker, name: &str) -> Option<(NonZeroU32, String)> {
        connected.core.redrive_of(name)
    }

    #[tokio::test]
    async fn a_bare_name_keeps_a_whole_redrive_policy_and_refuses_half_of_one() {
        let connected = connected().await;
        let three = NonZeroU32::new(3).expect("non-zero");
        let whole = RetryDeclaration::new()
            .with_max_attempts(three)
            .with_dead_letter("invoices-dead");
        connected
            .declare_retry("invoices", &whole)
            .expect("a whole policy");
        assert_eq!(
            stashed(&connected, "invoices"),
            Some((three, "invoices-dead".to_owned()))
        );

        let half = RetryDeclaration::new().with_max_attempts(three);
        let err = connected
            .declare_retry("orders", &half)
            .expect_err("half a policy");
        assert!(err.to_string().contains("dead_letter(..)"), "{err}");
        assert_eq!(stashed(&connected, "orders"), None);

        connected
            .declare_retry("invoices", &RetryDeclaration::new())
            .expect("an empty declaration");
        assert_eq!(
            stashed(&connected, "invoices"),
            None,
            "an empty declaration clears it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_publisher_made_before_connect_sends_while_a_clone_is_connected() {
        use ::ruststream::{BytesMut, HeaderMap, OutgoingMessage, Publisher};

        let script = crate::stand_in::StandIn::refusing("refuse", std::time::Duration::ZERO);
        let broker = SqsBroker::new().api(script.clone());
        let publisher = broker.publisher();
        let message = |body: &'static str| {
            OutgoingMessage::produced("q", BytesMut::from(body)).with_headers(HeaderMap::new())
        };
        let early = publisher.publish(message("early"), None).await;
        assert!(matches!(early, Err(SqsError::NotConnected)), "{early:?}");

        let connected = broker.clone().connect().await.expect("connect");
        publisher
            .publish(message("while connected"), None)
            .await
            .expect("sent through the clone's connection");
        connected.shutdown().await.expect("shutdown");
        let late = publisher.publish(message("late"), None).await;
        assert!(matches!(late, Err(SqsError::NotConnected)), "{late:?}");
        assert_eq!(script.calls().concat(), ["while connected"]);
    }

    #[tokio::test]
    async fn after_shutdown_nothing_subscribes_or_pairs() {
        let connected = connected().await;
        let other = connected.clone();
        connected.shutdown().await.expect("shutdown");
        let err = other
            .subscribe_queue(SqsQueue::new("orders"))
            .await
            .expect_err("closed");
        assert!(matches!(err, SqsError::NotConnected), "{err}");
        assert!(SqsPublish::default().pair(&other).await.is_err());
    }
}
