//! Message attributes as SQS carries them: a data type and a text or binary value.

/// A message attribute: its SQS data type (`String`, `Number`, `Binary`, or one of those with a
/// custom suffix) and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageAttribute {
    /// The data type as the sender gave it, such as `String` or `Number.int`.
    pub data_type: String,
    /// The value.
    pub value: AttributeValue,
}

/// The value of a [`MessageAttribute`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttributeValue {
    /// A `String` or `Number` attribute, as text.
    String(String),
    /// A `Binary` attribute.
    Binary(Vec<u8>),
}

impl MessageAttribute {
    /// The value as text, for `String` and `Number` attributes.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            AttributeValue::String(value) => Some(value),
            AttributeValue::Binary(_) => None,
        }
    }
}
