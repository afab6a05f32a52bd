//! What the engine's own unit tests share on the in-process SQS.

use super::InProcessSqs;
use crate::{Consumer, Engine, EngineBuilder};

/// A consumer of `queue` on `sqs`, its engine set further by `configure`.
pub(crate) async fn consumer(
    sqs: &InProcessSqs,
    queue: &str,
    configure: impl FnOnce(EngineBuilder) -> EngineBuilder,
) -> Consumer {
    configure(Engine::builder().api(sqs.clone()).queue(queue))
        .build()
        .expect("engine")
        .consumer()
        .await
        .expect("consumer")
}
