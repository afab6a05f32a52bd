//! How one entry of a batch call ended, and what SQS said of an entry it did not apply.

use std::fmt;

use super::error::is_throttling_code;

/// How one entry of a batch call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryResult {
    /// SQS applied it.
    Ok,
    /// SQS refused it.
    Failed(EntryFailure),
}

/// A batch entry that SQS did not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFailure {
    /// The error code SQS gave (`ReceiptHandleIsInvalid`, `InternalError`, ...).
    pub code: String,
    /// Whether SQS blamed the request rather than itself.
    pub sender_fault: bool,
    /// SQS's description, when it gave one.
    pub message: Option<String>,
}

impl EntryFailure {
    /// The failure of an entry the service's answer named neither as applied nor as failed:
    /// transient, so the entry is sent again.
    pub(crate) fn missing() -> Self {
        Self {
            code: "MissingEntryResult".into(),
            sender_fault: false,
            message: Some(
                "the service listed the entry neither as successful nor as failed".into(),
            ),
        }
    }

    /// Whether trying the same entry again may succeed.
    ///
    /// Codes that name something wrong with the entry itself (an invalid or expired receipt
    /// handle, a message no longer in flight, a value out of range) are permanent whatever
    /// `SenderFault` says; otherwise a server-side fault is transient.
    pub fn is_transient(&self) -> bool {
        const PERMANENT: &[&str] = &[
            "ReceiptHandleIsInvalid",
            "InvalidReceiptHandle",
            "MessageNotInflight",
            "AWS.SimpleQueueService.MessageNotInflight",
            "InvalidParameterValue",
            "InvalidParameterValueException",
            "InvalidBatchEntryId",
            "BatchEntryIdsNotDistinct",
            "InvalidAddress",
            // A body with characters SQS does not take (LocalStack calls it its own fault).
            "InvalidMessageContents",
        ];
        if PERMANENT.contains(&self.code.as_str()) {
            return false;
        }
        if is_throttling_code(&self.code) {
            return true;
        }
        !self.sender_fault
    }
}

impl fmt::Display for EntryFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.code)?;
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: &str, sender_fault: bool) -> EntryFailure {
        EntryFailure {
            code: code.to_owned(),
            sender_fault,
            message: None,
        }
    }

    #[test]
    fn an_invalid_receipt_handle_is_permanent_even_without_sender_fault() {
        assert!(!failure("ReceiptHandleIsInvalid", false).is_transient());
        assert!(!failure("ReceiptHandleIsInvalid", true).is_transient());
        assert!(!failure("InvalidMessageContents", false).is_transient());
    }

    #[test]
    fn a_server_side_entry_failure_is_transient() {
        assert!(failure("InternalError", false).is_transient());
        assert!(failure("ServiceUnavailable", false).is_transient());
    }

    #[test]
    fn a_sender_fault_is_permanent_unless_it_is_throttling() {
        assert!(!failure("SomethingElse", true).is_transient());
        assert!(failure("RequestThrottled", true).is_transient());
    }
}
