//! A queue setting holds a queue's name or its URL: which one, and the name at the end of a
//! URL.
//!
//! ```
//! use sqs_engine::queue_url::{is_url, name_of};
//!
//! assert!(is_url("https://sqs.eu-west-1.amazonaws.com/123456789012/orders"));
//! assert_eq!(name_of("https://sqs.eu-west-1.amazonaws.com/123456789012/orders"), "orders");
//! assert_eq!(name_of("orders"), "orders");
//! ```

/// Whether `queue` is a queue URL (`http://` or `https://`) rather than a queue name.
pub fn is_url(queue: &str) -> bool {
    queue.starts_with("https://") || queue.starts_with("http://")
}

/// The last path segment of `url`, a trailing `/` aside: the queue name at the end of a queue
/// URL. A string with no `/` is its own last segment.
pub fn last_segment(url: &str) -> &str {
    url.trim_end_matches('/').rsplit('/').next().unwrap_or(url)
}

/// The queue name `queue` stands for: the [`last_segment`] of a queue URL, or `queue` itself
/// when it is a name.
pub fn name_of(queue: &str) -> &str {
    if is_url(queue) {
        last_segment(queue)
    } else {
        queue
    }
}

/// Whether `destination` (a queue or topic, by name, URL or ARN) is FIFO: its name ends in
/// `.fifo`.
pub(crate) fn is_fifo(destination: &str) -> bool {
    destination.trim_end_matches('/').ends_with(".fifo")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_named_by_name_or_url() {
        assert_eq!(name_of("orders"), "orders");
        assert_eq!(
            name_of("http://127.0.0.1:4566/000000000000/orders"),
            "orders"
        );
        assert_eq!(
            name_of("https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo/"),
            "orders.fifo"
        );
        assert!(!is_url("orders"));
        assert!(is_url("http://127.0.0.1:4566/000000000000/orders"));
    }

    #[test]
    fn the_last_segment_ignores_a_trailing_slash() {
        assert_eq!(last_segment("/000000000000/orders/"), "orders");
        assert_eq!(last_segment("orders"), "orders");
        assert_eq!(last_segment("http://host/"), "host");
    }
}
