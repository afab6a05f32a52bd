//! Seed "Dead letters", the macro form: an invoice that is never ready is received three times
//! and then moves to `invoices-dead`, where a person takes it over. Its subscribers are in
//! `service.rs`, the one copy the engine's live tests include too.

use std::time::Duration;

use sqs_engine::prelude::*;

/// How long an invoice that is not ready waits before it is looked at again.
const RECHECK: Duration = Duration::from_secs(5);

include!("service.rs");

include!("app.rs");
