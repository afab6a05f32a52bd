//! The AWS Query protocol, as `aws-sdk-sns` speaks it: a form-encoded `POST /` body whose
//! `Action` field names the action (then `Version=2010-03-31`), members flattened into field
//! names (`Name`, `Attributes.entry.1.key`, `PublishBatchRequestEntries.member.1.Message`), and
//! XML answers: `<{Action}Response><{Action}Result>..</{Action}Result><ResponseMetadata>..`, or
//! on failure `<ErrorResponse><Error><Type/><Code/><Message/></Error>` with a 4xx status.
//!
//! Only what the SNS actions of [`super::sns`] need: reading fields, maps and lists of a form,
//! writing escaped XML, and the errors.

use std::collections::HashMap;
use std::fmt::Write as _;

use hyper::StatusCode;

/// The content type of a Query request body.
pub(crate) const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded";

/// The content type of a Query answer.
pub(crate) const XML_CONTENT_TYPE: &str = "text/xml";

/// The XML namespace of SNS answers.
const SNS_XMLNS: &str = "http://sns.amazonaws.com/doc/2010-03-31/";

/// A decoded form: field name to value (a field given twice keeps its last value).
#[derive(Debug, Default)]
pub(crate) struct Form {
    fields: HashMap<String, String>,
}

impl Form {
    /// Decodes an `application/x-www-form-urlencoded` body.
    pub(crate) fn parse(body: &[u8]) -> Self {
        Self {
            fields: form_urlencoded::parse(body).into_owned().collect(),
        }
    }

    /// The value of field `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// The value of field `name`, which the action needs.
    ///
    /// # Errors
    ///
    /// `InvalidParameter` when it is missing or empty.
    pub(crate) fn required(&self, name: &str) -> Result<&str, QueryError> {
        self.get(name)
            .filter(|value| !value.is_empty())
            .ok_or_else(|| QueryError::invalid_parameter(format!("the request has no {name}")))
    }

    /// The entries of the map member `prefix` (`prefix.entry.N.{key}` and
    /// `prefix.entry.N.{value}`, N from 1 up to the first missing), as key and value.
    pub(crate) fn map(&self, prefix: &str, key: &str, value: &str) -> Vec<(String, String)> {
        let mut entries = Vec::new();
        for n in 1.. {
            let Some(name) = self.get(&format!("{prefix}.entry.{n}.{key}")) else {
                break;
            };
            let value = self
                .get(&format!("{prefix}.entry.{n}.{value}"))
                .unwrap_or_default();
            entries.push((name.to_owned(), value.to_owned()));
        }
        entries
    }

    /// The prefixes of the members of list `prefix` (`prefix.member.N.`, N from 1 up to the
    /// first N with no field under it).
    pub(crate) fn members(&self, prefix: &str) -> Vec<String> {
        let mut members = Vec::new();
        for n in 1.. {
            let member = format!("{prefix}.member.{n}.");
            if !self.fields.keys().any(|name| name.starts_with(&member)) {
                break;
            }
            members.push(member);
        }
        members
    }
}

/// An SNS error as the Query protocol answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueryError {
    /// The HTTP status.
    pub(crate) status: StatusCode,
    /// The error code (`NotFound`, `InvalidParameter`, ...), which the SDK maps to its typed
    /// errors.
    pub(crate) code: &'static str,
    /// Whether the caller is at fault (`Sender`) rather than the service (`Receiver`).
    pub(crate) sender_fault: bool,
    /// Why, in words.
    pub(crate) message: String,
}

impl QueryError {
    /// A caller's error with `code`, answered with 400.
    pub(crate) fn sender(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code,
            sender_fault: true,
            message: message.into(),
        }
    }

    /// `InvalidParameter`.
    pub(crate) fn invalid_parameter(message: impl Into<String>) -> Self {
        Self::sender("InvalidParameter", message)
    }

    /// `NotFound`, answered with 404.
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            ..Self::sender("NotFound", message)
        }
    }

    /// The `ErrorResponse` document.
    pub(crate) fn body(&self, request_id: u64) -> Vec<u8> {
        let mut xml = format!("<ErrorResponse xmlns=\"{SNS_XMLNS}\"><Error><Type>");
        xml.push_str(if self.sender_fault {
            "Sender"
        } else {
            "Receiver"
        });
        let _ = write!(
            xml,
            "</Type><Code>{}</Code><Message>{}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>",
            self.code,
            escape(&self.message)
        );
        xml.into_bytes()
    }
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for QueryError {}

/// The answer document of `action` whose result element holds `result` (XML already
/// escaped).
pub(crate) fn answer(action: &str, result: &str, request_id: u64) -> Vec<u8> {
    format!(
        "<{action}Response xmlns=\"{SNS_XMLNS}\"><{action}Result>{result}</{action}Result>\
         <ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></{action}Response>"
    )
    .into_bytes()
}

/// `text` with the characters XML gives a meaning to escaped.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_reads_fields_maps_and_lists_as_the_sdk_flattens_them() {
        let form = Form::parse(
            b"Action=Subscribe&Version=2010-03-31&Attributes.entry.1.key=RawMessageDelivery\
              &Attributes.entry.1.value=true&Attributes.entry.2.key=x&Attributes.entry.2.value=a%26b\
              &L.member.1.Id=0&L.member.2.Id=1&L.member.4.Id=3",
        );
        assert_eq!(form.get("Action"), Some("Subscribe"));
        assert_eq!(
            form.map("Attributes", "key", "value"),
            [
                ("RawMessageDelivery".to_owned(), "true".to_owned()),
                ("x".to_owned(), "a&b".to_owned())
            ]
        );
        assert_eq!(form.members("L"), ["L.member.1.", "L.member.2."]);
        assert!(form.required("TopicArn").is_err());
    }

    #[test]
    fn text_in_answers_is_escaped() {
        assert_eq!(escape("<a & 'b'>\""), "&lt;a &amp; &apos;b&apos;&gt;&quot;");
        let error = QueryError::not_found("no <topic>").body(7);
        let text = String::from_utf8(error).expect("UTF-8");
        assert!(text.contains("<Code>NotFound</Code><Message>no &lt;topic&gt;</Message>"));
    }
}
