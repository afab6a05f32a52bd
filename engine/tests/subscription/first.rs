//! The first delivery of a new subscription; its own file, so that a test target that needs
//! only it includes only it (with `next.rs`, which it uses as `super::subscription_next`).

use ruststream::{Broker, Subscriber};
use sqs_engine::prelude::*;

use super::subscription_next::next;

/// The first delivery of `queue` on a connection of `broker`, with the connection and the
/// subscription.
///
/// # Panics
///
/// When the connection or the subscription fails, or no delivery comes within 20 s.
pub(crate) async fn first_delivery(
    broker: SqsBroker,
    queue: SqsQueue,
) -> (
    ConnectedSqsBroker,
    sqs_engine::ruststream::SqsSubscriber,
    SqsMessage,
) {
    let connected = broker.connect().await.expect("connect");
    let mut subscriber = connected.subscribe_queue(queue).await.expect("subscribe");
    let delivery = next(&mut Box::pin(subscriber.stream()), "the first delivery").await;
    (connected, subscriber, delivery)
}
