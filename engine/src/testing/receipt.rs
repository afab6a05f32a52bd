//! The receipt handles the double hands out: `<message id>:<sequence number>:<receive count>`.
//!
//! The sequence number finds the message in its queue's model without a scan; the receive
//! count tells the latest receive from a stale one; the message id, unique across queues,
//! tells a handle of this message from one of another that held the same sequence number, and
//! names the message in the journal even once it is gone.

/// What a receipt handle names: one receive of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Receipt<'a> {
    /// The message id.
    pub(super) message_id: &'a str,
    /// The message's sequence number in its queue.
    pub(super) seq: u64,
    /// The message's receive count at that receive.
    pub(super) receive_count: u32,
}

impl<'a> Receipt<'a> {
    /// Parses a handle; `None` when it is not one the double hands out.
    pub(super) fn parse(handle: &'a str) -> Option<Self> {
        let mut parts = handle.split(':');
        let message_id = parts.next().filter(|id| id.starts_with("m-"))?;
        let seq = parts.next()?.parse().ok()?;
        let receive_count = parts.next()?.parse().ok()?;
        parts.next().is_none().then_some(Self {
            message_id,
            seq,
            receive_count,
        })
    }
}

impl std::fmt::Display for Receipt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.message_id, self.seq, self.receive_count)
    }
}

#[cfg(test)]
mod tests {
    use super::Receipt;

    #[test]
    fn a_receipt_handle_round_trips_and_a_foreign_one_is_refused() {
        let receipt = Receipt {
            message_id: "m-00000007",
            seq: 3,
            receive_count: 2,
        };
        let text = receipt.to_string();
        assert_eq!(text, "m-00000007:3:2");
        assert_eq!(Receipt::parse(&text), Some(receipt));
        for foreign in ["", "m-1", "m-1:2", "x-1:2:3", "m-1:2:3:4", "m-1:a:3"] {
            assert_eq!(Receipt::parse(foreign), None, "{foreign}");
        }
    }
}
