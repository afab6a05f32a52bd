//! SNS topics by name (feature `sns`): the topic a destination names.

use std::borrow::Cow;

use super::queue::queue_name;
pub(crate) use crate::publish::topic_arn;

/// The topic a destination names: an ARN as it is, a name mapped onto the characters SNS takes
/// the way a queue name is (see [`super::queue_name`]), a `.fifo` suffix kept.
pub(crate) fn topic_name(destination: &str) -> Cow<'_, str> {
    if destination.starts_with("arn:") {
        Cow::Borrowed(destination)
    } else {
        queue_name(destination)
    }
}
