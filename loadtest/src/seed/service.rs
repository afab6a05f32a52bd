// The payments service of `seeds/src/bin/payments/` (its `book` subscriber, included from the
// seed's own `book.rs`), included into one module per broker after that module's
// `use <broker>::prelude::*;`: the same code on both. The handler, its messages and its queue
// names are the seed's; only the app is built here from the run's SDK configuration and worker
// count instead of the seed's fixed endpoint.
// (No inner doc comment: this file is `include!`d.)

use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::time::Duration;


/// How long a payment on an account under review waits before the next try.
const REVIEW: Duration = Duration::from_secs(60);

include!("../../../seeds/src/bin/payments/book.rs");

/// Runs the service on `config` with `workers` deliveries of `book` at once (the seed's mount,
/// with `.workers(..)`), until `stop` completes; then shuts it down gracefully.
///
/// # Errors
///
/// When the service cannot start (a queue cannot be opened) or its shutdown fails.
pub(crate) async fn serve(
    config: aws_config::SdkConfig,
    workers: NonZeroUsize,
    started: impl FnOnce(),
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let app = RustStream::new(AppInfo::new("payments", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(Ledger::default()))
        .with_broker(SqsBroker::from_config(config), move |b| {
            b.include(book.workers(workers))
                .out(Entries, Publish::default())
                .build();
        });
    let running = app
        .start()
        .await
        .map_err(|error| anyhow::anyhow!("starting the payments service: {error}"))?;
    started();
    stop.await;
    running
        .shutdown()
        .await
        .map_err(|error| anyhow::anyhow!("shutting the payments service down: {error}"))
}
