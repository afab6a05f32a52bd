//! The calls the double applies under its lock: receive, delete, visibility change, send.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use super::InProcessSqs;
use super::errors::{entry_failure, invalid};
use super::journal::Change;
use super::model::rules::{ACCOUNT_ID, MAX_MESSAGE_BYTES};
use crate::api::{CallError, EntryResult, ReceiveRequest, ReceivedMessage, SendEntry};
use crate::limits::MAX_VISIBILITY_SECS;

fn millis(time: SystemTime) -> String {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
        .to_string()
}

impl InProcessSqs {
    pub(super) fn receive_now(
        &self,
        name: &str,
        reader: Option<u64>,
        request: &ReceiveRequest<'_>,
    ) -> Vec<ReceivedMessage> {
        let now = Instant::now();
        let mut state = self.shared.lock();
        let moved = state.redrive_spent(name, now);
        if let Some(dead_letter) = moved {
            self.refresh(&mut state, &dead_letter);
        }
        let observer = state.observer.clone();
        let next_receipt = state.next_id;
        let Some(queue) = state.queues.get_mut(name) else {
            return Vec::new();
        };
        if reader.is_some() && queue.watchers.first() != reader.as_ref() {
            return Vec::new();
        }
        let visibility = if request.visibility_timeout == 0 {
            queue.visibility
        } else {
            request.visibility_timeout
        };
        if queue.fifo
            && let Some(id) = request.attempt_id
            && let Some(again) = queue.attempt_again(id, now)
        {
            return again;
        }
        let take: Vec<usize> = queue
            .receivable(now)
            .into_iter()
            .take(usize::from(request.max_messages))
            .collect();
        let fifo = queue.fifo;
        let watched = !queue.watchers.is_empty();
        let mut owed = Vec::new();
        let mut notes = Vec::new();
        let mut received = Vec::with_capacity(take.len());
        for (n, position) in take.into_iter().enumerate() {
            let message = &mut queue.messages[position];
            message.receive_count += 1;
            let first_receive = *message.first_receive.get_or_insert_with(SystemTime::now);
            let receipt = format!(
                "{}:{}:{}",
                message.id,
                message.receive_count,
                next_receipt + n as u64
            );
            message.receipt = Some((receipt.clone(), now));
            message.visible_at = now + Duration::from_secs(u64::from(visibility));
            notes.push((
                message.id.clone(),
                Change::Received {
                    receipt_handle: receipt.clone(),
                    receive_count: message.receive_count,
                    visibility,
                },
            ));
            if let Some(observer) = &observer {
                if !message.counted && watched {
                    observer.enqueued();
                    message.counted = true;
                }
                if message.counted {
                    message.counted = false;
                    owed.push((message.id.clone(), message.receive_count));
                }
            }
            let mut attributes = HashMap::from([
                (
                    "ApproximateReceiveCount".to_owned(),
                    message.receive_count.to_string(),
                ),
                ("SentTimestamp".to_owned(), millis(message.sent_at)),
                (
                    "ApproximateFirstReceiveTimestamp".to_owned(),
                    millis(first_receive),
                ),
                ("SenderId".to_owned(), ACCOUNT_ID.to_owned()),
            ]);
            if fifo {
                if let Some(group) = &message.group {
                    attributes.insert("MessageGroupId".to_owned(), group.clone());
                }
                if let Some(id) = &message.deduplication_id {
                    attributes.insert("MessageDeduplicationId".to_owned(), id.clone());
                }
                attributes.insert("SequenceNumber".to_owned(), message.sequence.to_string());
            }
            received.push(ReceivedMessage {
                message_id: message.id.clone(),
                receipt_handle: receipt,
                body: message.body.clone(),
                attributes,
                message_attributes: message.attributes.iter().cloned().collect(),
            });
        }
        if fifo
            && !received.is_empty()
            && let Some(id) = request.attempt_id
        {
            queue
                .attempts
                .insert(id.to_owned(), (now, received.clone()));
        }
        state.next_id += received.len() as u64;
        state.owed.extend(owed);
        for (message_id, change) in notes {
            state.note(name, &message_id, change);
        }
        if !received.is_empty() {
            self.wake_after(&state, name, Duration::from_secs(u64::from(visibility)));
        }
        received
    }

    pub(super) fn delete(&self, name: &str, handles: &[&str]) -> Vec<EntryResult> {
        let mut state = self.shared.lock();
        let observer = state.observer.clone();
        let Some(queue) = state.queues.get_mut(name) else {
            return Vec::new();
        };
        let mut results = Vec::with_capacity(handles.len());
        let mut notes = Vec::new();
        for handle in handles {
            let (id, _) = handle.split_once(':').unwrap_or((handle, ""));
            let position = queue.messages.iter().position(|m| m.id == id);
            let deleted = |removed| {
                (
                    id.to_owned(),
                    Change::Deleted {
                        receipt_handle: (*handle).to_owned(),
                        removed,
                    },
                )
            };
            let result = match position {
                Some(position) => {
                    let current = queue.messages[position]
                        .receipt
                        .as_ref()
                        .is_some_and(|(receipt, _)| receipt == handle);
                    notes.push(deleted(current));
                    if current
                        && let Some(message) = queue.messages.remove(position)
                        && message.counted
                        && let Some(observer) = &observer
                    {
                        observer.consumed();
                    }
                    // An older handle of a message received again: success, nothing deleted.
                    EntryResult::Ok
                }
                // A message already deleted: SQS answers success again.
                None if handle.contains(':') && id.starts_with("m-") => {
                    notes.push(deleted(false));
                    EntryResult::Ok
                }
                None => entry_failure(
                    "ReceiptHandleIsInvalid",
                    format!("the receipt handle {handle} is not valid"),
                ),
            };
            results.push(result);
        }
        for (message_id, change) in notes {
            state.note(name, &message_id, change);
        }
        self.refresh(&mut state, name);
        results
    }

    pub(super) fn change_visibility(
        &self,
        name: &str,
        entries: &[(&str, u32)],
    ) -> Vec<EntryResult> {
        let now = Instant::now();
        let mut state = self.shared.lock();
        let Some(queue) = state.queues.get_mut(name) else {
            return Vec::new();
        };
        let mut results = Vec::with_capacity(entries.len());
        let mut wakes = Vec::new();
        let mut notes = Vec::new();
        for (handle, seconds) in entries {
            let (id, _) = handle.split_once(':').unwrap_or((handle, ""));
            let Some(message) = queue.messages.iter_mut().find(|m| m.id == id) else {
                results.push(if handle.contains(':') && id.starts_with("m-") {
                    entry_failure(
                        "AWS.SimpleQueueService.MessageNotInflight",
                        "the message is not in flight",
                    )
                } else {
                    entry_failure(
                        "ReceiptHandleIsInvalid",
                        format!("the receipt handle {handle} is not valid"),
                    )
                });
                continue;
            };
            let received_at = match &message.receipt {
                Some((receipt, at)) if receipt == handle && message.visible_at > now => *at,
                _ => {
                    results.push(entry_failure(
                        "AWS.SimpleQueueService.MessageNotInflight",
                        "the message is not in flight",
                    ));
                    continue;
                }
            };
            let until = now + Duration::from_secs(u64::from(*seconds));
            if *seconds > MAX_VISIBILITY_SECS
                || until > received_at + Duration::from_secs(u64::from(MAX_VISIBILITY_SECS))
            {
                results.push(entry_failure(
                    "InvalidParameterValue",
                    format!(
                        "a visibility timeout of {seconds} s ends more than 12 hours after the receive"
                    ),
                ));
                continue;
            }
            message.visible_at = until;
            notes.push((
                message.id.clone(),
                Change::VisibilityChanged {
                    receipt_handle: (*handle).to_owned(),
                    seconds: *seconds,
                },
            ));
            if *seconds > 0 {
                wakes.push(Duration::from_secs(u64::from(*seconds)));
            }
            results.push(EntryResult::Ok);
        }
        for (message_id, change) in notes {
            state.note(name, &message_id, change);
        }
        for delay in wakes {
            self.wake_after(&state, name, delay);
        }
        self.refresh(&mut state, name);
        results
    }

    pub(super) fn send_batch(
        &self,
        name: &str,
        entries: &[SendEntry],
    ) -> Result<Vec<EntryResult>, CallError> {
        let mut state = self.shared.lock();
        let total: usize = entries.iter().map(SendEntry::size).sum();
        if total > MAX_MESSAGE_BYTES {
            return Err(invalid(
                "AWS.SimpleQueueService.BatchRequestTooLong",
                format!("the batch is {total} bytes, SQS takes at most {MAX_MESSAGE_BYTES}"),
            ));
        }
        let results: Vec<EntryResult> = entries
            .iter()
            .map(|entry| match state.send(name, entry) {
                Ok(_) => EntryResult::Ok,
                Err(error) => entry_failure(
                    error.code.as_deref().unwrap_or("InvalidParameterValue"),
                    error.message,
                ),
            })
            .collect();
        let delay = state.queues.get(name).map_or(0, |queue| queue.delay);
        if delay > 0 && results.contains(&EntryResult::Ok) {
            self.wake_after(&state, name, Duration::from_secs(u64::from(delay)));
        }
        self.refresh(&mut state, name);
        Ok(results)
    }
}
