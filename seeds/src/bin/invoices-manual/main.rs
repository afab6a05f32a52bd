//! Seed "Dead letters", the manual form: the same service with `Handle` implementations. They
//! are in `service.rs`, the one copy the engine's live tests include too.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqs_engine::prelude::*;

/// How long an invoice that is not ready waits before it is looked at again.
const RECHECK: Duration = Duration::from_secs(5);

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Invoice {
    id: u64,
}

include!("service.rs");

include!("../invoices/app.rs");
