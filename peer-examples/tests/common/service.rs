// One service, written once against the prelude in scope where this file is included: the
// AsyncAPI comparison builds it on each broker.

#[derive(Debug, Deserialize, Serialize, Outgoing)]
#[outgoing(name = "orders")]
pub struct Order {
    id: u64,
}

#[derive(Debug, Deserialize, Serialize, Outgoing)]
pub struct Confirmation {
    id: u64,
}

#[derive(Debug, Deserialize, Serialize, Outgoing)]
#[outgoing(name = "payment-events.fifo")]
pub struct PaymentSettled {
    id: u64,
}

#[derive(Debug, Deserialize, Serialize, Outgoing)]
#[outgoing(name = "order-events")]
pub struct OrderPlaced {
    id: u64,
}

#[subscriber(
    SqsQueue::new("orders")
        .wait(std::time::Duration::from_secs(10))
        .visibility(std::time::Duration::from_millis(29_500)),
    reply("confirmations")
)]
async fn confirm(order: &Order) -> Confirmation {
    Confirmation { id: order.id }
}

#[subscriber(SqsQueue::new("shipments.fifo"))]
async fn ship(_order: &Order) -> HandlerOutcome {
    HandlerOutcome::ack()
}

#[subscriber(SqsQueue::new("payments.fifo"), reply)]
async fn settle(order: &Order) -> PaymentSettled {
    PaymentSettled { id: order.id }
}

#[subscriber(SqsQueue::new("placements"), reply)]
async fn place(order: &Order) -> OrderPlaced {
    OrderPlaced { id: order.id }
}

#[subscriber("invoices")]
async fn invoice(_order: &Order) -> HandlerOutcome {
    HandlerOutcome::retry()
}

pub fn service(broker: SqsBroker) -> impl App<State = ()> {
    RustStream::new(AppInfo::new("orders", "1.0.0")).with_broker_labeled("sqs", broker, |b| {
        b.include(confirm);
        b.include(ship);
        b.include(settle)
            .out_reply(SnsPublish::default().group_id("payments"));
        b.include(place).out_reply(SnsPublish::default());
        b.include(invoice)
            .max_attempts(std::num::NonZeroU32::new(3).expect("non-zero"))
            .dead_letter("invoices-dead");
    })
}
