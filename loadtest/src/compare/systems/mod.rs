//! How each system compared runs: [`engine`] (sqs-engine's native API), [`framework`] (one
//! RustStream service on sqs-engine's own broker and on `ruststream-sqs-sns` 0.7), [`naive`] (a
//! hand-written `aws-sdk-sqs` loop) and [`ceiling`] (receive and batch-delete, no handler). A
//! new system is one variant of [`System`] and one module.

mod calls;
mod ceiling;
mod engine;
mod framework;
mod naive;

use std::sync::Arc;

use anyhow::Result;
use aws_config::SdkConfig;

use self::calls::Calls;
use super::job::Job;
use super::probe::Probe;
use super::system::System;

impl System {
    /// Runs the system on the job's queue until the probe's target is reached, and returns
    /// the calls it counted itself (`None` when it cannot count them).
    ///
    /// # Errors
    ///
    /// When the system cannot start.
    pub(crate) async fn run(
        self,
        job: &Job,
        config: &SdkConfig,
        probe: Arc<Probe>,
    ) -> Result<Option<Calls>> {
        match self {
            Self::SqsEngine => engine::run(job, config, probe).await.map(Some),
            Self::SqsEngineBroker => framework::sqs_engine_broker::run(job, config, probe).await,
            Self::RuststreamSqsSns => framework::ruststream_sqs_sns::run(job, config, probe).await,
            Self::Naive => naive::run(job, aws_sdk_sqs::Client::new(config), probe)
                .await
                .map(Some),
            Self::Ceiling => ceiling::run(job, aws_sdk_sqs::Client::new(config), probe)
                .await
                .map(Some),
        }
    }
}
