//! The limits SQS sets that the engine holds to, and the checks SQS (and SNS) make on names
//! and text, each stated once: the engine's settings, the publishers, the RustStream broker's
//! subscriptions, the in-process SQS (feature `testing`) and the load test's embedded server
//! all read them from here.

use std::time::Duration;

/// The longest visibility timeout SQS takes, in seconds (12 hours); also how long after its
/// receive a message may stay hidden at the most.
pub const MAX_VISIBILITY_SECS: u32 = 12 * 60 * 60;

/// [`MAX_VISIBILITY_SECS`] as a duration: SQS refuses a visibility that ends more than 12 hours
/// after the receive.
pub const MAX_VISIBILITY: Duration = Duration::from_secs(MAX_VISIBILITY_SECS as u64);

/// The most entries in one batch call, and the most messages one receive hands out.
pub const MAX_BATCH_ENTRIES: usize = 10;

/// The largest message (body and attributes together) and the largest `SendMessageBatch`, in
/// bytes (1 MiB).
pub const MAX_MESSAGE_BYTES: usize = 1_048_576;

/// The most message attributes on one message.
pub const MAX_MESSAGE_ATTRIBUTES: usize = 10;

/// The longest queue name, the `.fifo` suffix of a FIFO queue counted.
pub const MAX_QUEUE_NAME_LEN: usize = 80;

/// The longest long poll, in seconds.
pub const MAX_WAIT_SECS: u32 = 20;

/// The longest delay of a message, in seconds (15 minutes).
pub const MAX_DELAY_SECS: u32 = 900;

/// How long a FIFO queue remembers a deduplication id (and a receive's attempt id).
pub const DEDUPLICATION_WINDOW: Duration = Duration::from_secs(300);

/// Whether SQS takes `name` as a queue name: 1 to 80 letters, digits, `-` and `_`, with the
/// `.fifo` suffix of a FIFO queue counted in the 80.
pub fn valid_queue_name(name: &str) -> bool {
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    !stem.is_empty()
        && name.len() <= MAX_QUEUE_NAME_LEN
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Whether SNS takes `name` as a topic name: 1 to 256 letters, digits, `-` and `_`, with the
/// `.fifo` suffix of a FIFO topic counted in the 256.
pub fn valid_topic_name(name: &str) -> bool {
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    !stem.is_empty()
        && name.len() <= 256
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Whether SQS takes every character of `text` in a body or a string attribute: tab, line
/// feed, carriage return, and `U+0020` on, but for `U+FFFE` and `U+FFFF` (a `char` is never a
/// surrogate).
pub fn valid_text(text: &str) -> bool {
    text.chars().all(|c| {
        matches!(c, '\t' | '\n' | '\r') || (c >= '\u{20}' && c != '\u{FFFE}' && c != '\u{FFFF}')
    })
}

/// Whether SQS takes `name` as a message attribute's name: 1 to 256 ASCII letters, digits,
/// `_`, `-` and `.`, with no leading, trailing or doubled `.`, and not starting with `AWS.` or
/// `Amazon.` (in any case).
pub fn valid_attribute_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    (1..=256).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..")
        && !lower.starts_with("aws.")
        && !lower.starts_with("amazon.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_name_counts_its_fifo_suffix_and_takes_only_letters_digits_dash_and_underscore() {
        assert!(valid_queue_name("orders-2_b"));
        assert!(valid_queue_name(&format!("{}.fifo", "q".repeat(75))));
        assert!(!valid_queue_name(&format!("{}.fifo", "q".repeat(76))));
        assert!(!valid_queue_name(&"q".repeat(81)));
        assert!(!valid_queue_name(""));
        assert!(!valid_queue_name(".fifo"));
        assert!(!valid_queue_name("orders.v2"));
    }

    #[test]
    fn text_refuses_control_characters_but_tab_and_line_ends_and_the_two_non_characters() {
        assert!(valid_text("tab\tlf\ncr\r é ✓ 🦀"));
        assert!(!valid_text("bell\u{7}"));
        assert!(!valid_text("\u{FFFE}"));
        assert!(!valid_text("\u{FFFF}"));
    }

    #[test]
    fn a_topic_name_counts_its_fifo_suffix_in_256() {
        assert!(valid_topic_name("order-events_2"));
        assert!(valid_topic_name(&format!("{}.fifo", "t".repeat(251))));
        assert!(!valid_topic_name(&format!("{}.fifo", "t".repeat(252))));
        assert!(!valid_topic_name(""));
        assert!(!valid_topic_name(".fifo"));
        assert!(!valid_topic_name("order.events"));
    }

    #[test]
    fn an_attribute_name_takes_letters_digits_and_inner_single_dots_and_no_reserved_prefix() {
        assert!(valid_attribute_name("x-ruststream-retry-count"));
        assert!(valid_attribute_name("a.b_c"));
        assert!(!valid_attribute_name(""));
        assert!(!valid_attribute_name(&"a".repeat(257)));
        assert!(!valid_attribute_name("has space"));
        assert!(!valid_attribute_name(".a"));
        assert!(!valid_attribute_name("a."));
        assert!(!valid_attribute_name("a..b"));
        assert!(!valid_attribute_name("AWS.thing"));
        assert!(!valid_attribute_name("amazon.thing"));
    }
}
