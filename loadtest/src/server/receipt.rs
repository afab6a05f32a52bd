//! The server's receipt handles: what one names, and its text.

use std::fmt;

/// What a receipt handle names: one receive of one message of one queue.
///
/// Its text is 40 hex digits: the queue's incarnation (so a handle from a deleted queue
/// never matches a new queue of the same name), the message's sequence number and its
/// receive count, which makes it unique per receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReceiptHandle {
    /// The incarnation of the queue.
    pub(crate) incarnation: u64,
    /// The message's sequence number in the queue.
    pub(crate) seq: u64,
    /// The message's receive count at that receive.
    pub(crate) receive_count: u32,
}

impl ReceiptHandle {
    /// Parses the text of a handle; `None` when it is malformed.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        if text.len() != 40 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(Self {
            incarnation: u64::from_str_radix(text.get(..16)?, 16).ok()?,
            seq: u64::from_str_radix(text.get(16..32)?, 16).ok()?,
            receive_count: u32::from_str_radix(text.get(32..)?, 16).ok()?,
        })
    }
}

impl ReceiptHandle {
    /// The text of the handle, as ASCII bytes, without allocating.
    fn encode(&self) -> [u8; 40] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 40];
        let fields = [
            (self.incarnation, 0, 16),
            (self.seq, 16, 16),
            (u64::from(self.receive_count), 32, 8),
        ];
        for (value, offset, digits) in fields {
            for i in 0..digits {
                let shift = 4 * (digits - 1 - i);
                // Masked to 0..16.
                let nibble = usize::try_from((value >> shift) & 0xF).unwrap_or_default();
                text[offset + i] = HEX[nibble];
            }
        }
        text
    }
}

impl fmt::Display for ReceiptHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(std::str::from_utf8(&self.encode()).unwrap_or_default())
    }
}

impl serde::Serialize for ReceiptHandle {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(std::str::from_utf8(&self.encode()).unwrap_or_default())
    }
}
