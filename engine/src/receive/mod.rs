//! The receive side of one queue: the opened queue (`queue.rs`), the long-poll receivers
//! (`receiver.rs`) and how many run (`count.rs`, a pure state), what holds them back besides
//! the consumer's room (`crate::room`): a rate cap (`receive_rate.rs`) and a pause
//! (`pause.rs`), the demand they size themselves by (`take_rate.rs`, `worker_capacity.rs`), what
//! may wait received while the heartbeat is off (`lapse_bound.rs`), the
//! deliveries they make (`delivery.rs`), the FIFO group gate (`fifo.rs`, `turn.rs`), and the
//! consumer that runs them with the settlement (`consumer.rs`).

pub(crate) mod consumer;
pub(crate) mod count;
pub(crate) mod delivery;
pub(crate) mod fifo;
pub(crate) mod lapse_bound;
pub(crate) mod pause;
pub(crate) mod queue;
pub(crate) mod receive_rate;
pub(crate) mod receiver;
pub(crate) mod take_rate;
pub(crate) mod turn;
pub(crate) mod worker_capacity;
