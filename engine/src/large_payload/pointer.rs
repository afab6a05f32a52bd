//! The pointer that AWS's extended client libraries (Java's `amazon-sqs-java-extended-client-lib`,
//! Python's `amazon-sqs-extended-client`) send in place of a body stored in S3, and the message
//! attribute that marks it.
//!
//! A pointer's body is a JSON array of the pointer's class name and the object's place:
//! `["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "b", "s3Key": "k"}]`.
//! The marking attribute, `ExtendedPayloadSize` (`SQSLargePayloadSize` in the libraries' older
//! releases), is a `Number` holding the stored body's size in bytes.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::attribute::{AttributeValue, MessageAttribute};

/// The attribute that marks a body stored in S3, with its size in bytes.
pub(crate) const SIZE_ATTRIBUTE: &str = "ExtendedPayloadSize";
/// The same attribute as the libraries' older releases name it.
pub(crate) const LEGACY_SIZE_ATTRIBUTE: &str = "SQSLargePayloadSize";
/// The pointer's class name, as the current libraries write it.
const POINTER_CLASS: &str = "software.amazon.payloadoffloading.PayloadS3Pointer";
/// The pointer's class name in the libraries' older releases.
const LEGACY_POINTER_CLASS: &str = "com.amazon.sqs.javamessaging.MessageS3Pointer";

/// Where a body stored in S3 is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct S3Location {
    pub(crate) bucket: String,
    pub(crate) key: String,
}

impl std::fmt::Display for S3Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.key)
    }
}

/// The object's place as the pointer names its fields.
#[derive(Deserialize, Serialize)]
struct Place {
    #[serde(rename = "s3BucketName")]
    bucket: String,
    #[serde(rename = "s3Key")]
    key: String,
}

/// Whether `attributes` mark the body as a pointer to S3.
pub(crate) fn is_marked(attributes: &HashMap<String, MessageAttribute>) -> bool {
    attributes.contains_key(SIZE_ATTRIBUTE) || attributes.contains_key(LEGACY_SIZE_ATTRIBUTE)
}

/// The stored body's size that `attributes` declare, when they mark a pointer and the size is
/// a whole number of bytes.
pub(crate) fn declared_size(attributes: &HashMap<String, MessageAttribute>) -> Option<usize> {
    attributes
        .get(SIZE_ATTRIBUTE)
        .or_else(|| attributes.get(LEGACY_SIZE_ATTRIBUTE))
        .and_then(MessageAttribute::as_str)
        .and_then(|size| size.trim().parse().ok())
}

/// Takes the marking attributes out of `attributes`: the handler sees the message as it was
/// sent.
pub(crate) fn unmark(attributes: &mut HashMap<String, MessageAttribute>) {
    attributes.remove(SIZE_ATTRIBUTE);
    attributes.remove(LEGACY_SIZE_ATTRIBUTE);
}

/// The object a pointer's body names.
///
/// # Errors
///
/// What is wrong with a body that is not a pointer, for the message's error.
pub(crate) fn parse(body: &str) -> Result<S3Location, String> {
    let (class, place): (String, Place) = serde_json::from_str(body).map_err(|error| {
        format!("the body is marked as stored in S3 but is not an S3 pointer: {error}")
    })?;
    if class != POINTER_CLASS && class != LEGACY_POINTER_CLASS {
        return Err(format!(
            "the body is marked as stored in S3 but points with the unknown class {class:?}"
        ));
    }
    Ok(S3Location {
        bucket: place.bucket,
        key: place.key,
    })
}

/// The pointer's body for `location`, as the current libraries write it.
pub(crate) fn format(location: &S3Location) -> String {
    let place = Place {
        bucket: location.bucket.clone(),
        key: location.key.clone(),
    };
    // Two strings and a class name: serializing them cannot fail.
    serde_json::to_string(&(POINTER_CLASS, place)).unwrap_or_default()
}

/// The attribute that marks a body of `size` bytes stored in S3.
pub(crate) fn marking(size: usize) -> (String, MessageAttribute) {
    (
        SIZE_ATTRIBUTE.to_owned(),
        MessageAttribute {
            data_type: "Number".into(),
            value: AttributeValue::String(size.to_string()),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes(name: &str, value: &str) -> HashMap<String, MessageAttribute> {
        HashMap::from([(
            name.to_owned(),
            MessageAttribute {
                data_type: "Number".into(),
                value: AttributeValue::String(value.into()),
            },
        )])
    }

    #[test]
    fn a_pointer_written_is_read_back() {
        let location = S3Location {
            bucket: "payloads".into(),
            key: "0b7c-41".into(),
        };
        let body = format(&location);
        assert_eq!(
            body,
            r#"["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"payloads","s3Key":"0b7c-41"}]"#
        );
        assert_eq!(parse(&body), Ok(location));
    }

    #[test]
    fn the_older_libraries_pointers_are_read() {
        let body = r#"["com.amazon.sqs.javamessaging.MessageS3Pointer", {"s3Key": "k", "s3BucketName": "b"}]"#;
        assert_eq!(
            parse(body),
            Ok(S3Location {
                bucket: "b".into(),
                key: "k".into()
            })
        );
    }

    #[test]
    fn a_body_that_is_not_a_pointer_says_why() {
        let plain = parse("hello").expect_err("not a pointer");
        assert!(plain.contains("not an S3 pointer"), "{plain}");
        let other = parse(r#"["com.example.Elsewhere", {"s3BucketName": "b", "s3Key": "k"}]"#)
            .expect_err("an unknown class");
        assert!(other.contains("com.example.Elsewhere"), "{other}");
        let no_key =
            parse(&format!(r#"["{POINTER_CLASS}", {{"s3BucketName": "b"}}]"#)).expect_err("no key");
        assert!(no_key.contains("s3Key"), "{no_key}");
    }

    #[test]
    fn either_attribute_marks_a_pointer_and_declares_its_size() {
        for name in [SIZE_ATTRIBUTE, LEGACY_SIZE_ATTRIBUTE] {
            let mut marked = attributes(name, "300000");
            assert!(is_marked(&marked));
            assert_eq!(declared_size(&marked), Some(300_000));
            unmark(&mut marked);
            assert!(marked.is_empty());
        }
        let other = attributes("Size", "3");
        assert!(!is_marked(&other));
        assert_eq!(declared_size(&other), None);
        assert_eq!(declared_size(&attributes(SIZE_ATTRIBUTE, "many")), None);
    }

    #[test]
    fn the_marking_attribute_is_a_number_of_bytes() {
        let (name, attribute) = marking(1_048_577);
        assert_eq!(name, SIZE_ATTRIBUTE);
        assert_eq!(attribute.data_type, "Number");
        assert_eq!(attribute.as_str(), Some("1048577"));
    }
}
