//! The calls the double applies under its lock: receive, delete, visibility change, send.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use super::InProcessSqs;
use super::duplicates::Duplicates;
use super::errors::entry_failure;
use super::journal::Change;
use super::model::rules::{ACCOUNT_ID, check_batch_size};
use super::model::{ErrorKind, ModelError};
use super::receipt::Receipt;
use super::store::State;
use crate::api::{CallError, EntryResult, ReceiveRequest, ReceivedMessage, SendEntry};
use crate::handle::system_attributes::asked_for;

/// `time` in milliseconds since the epoch.
fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
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
        let mut duplicates = state.duplicates.take();
        let received = self.receive_locked(&mut state, &mut duplicates, name, reader, request, now);
        state.duplicates = duplicates;
        received
    }

    /// [`receive_now`](Self::receive_now) under the lock, with the duplicate deliveries' draws
    /// taken out of the state.
    fn receive_locked(
        &self,
        state: &mut State,
        duplicates: &mut Option<Duplicates>,
        name: &str,
        reader: Option<u64>,
        request: &ReceiveRequest<'_>,
        now: Instant,
    ) -> Vec<ReceivedMessage> {
        let observer = state.observer.clone();
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
        queue.messages.release_due(now);
        if queue.fifo
            && let Some(id) = request.attempt_id
            && let Some(again) =
                queue.attempt_again(id, now, Duration::from_secs(u64::from(visibility)))
        {
            // Their visibility starts again: the receivers waiting for them look again then.
            self.wake_after(state, name, Duration::from_secs(u64::from(visibility)));
            return again;
        }
        let mut taken = Vec::with_capacity(usize::from(request.max_messages));
        let deadline = now + Duration::from_secs(u64::from(visibility));
        queue.messages.receive(
            now,
            deadline,
            millis(SystemTime::now()),
            usize::from(request.max_messages),
            &mut taken,
        );
        let handed_out = taken.len();
        if handed_out < usize::from(request.max_messages)
            && let Some(duplicates) = duplicates.as_mut()
            && let Some(again) = duplicates.draw(queue, now, deadline, &taken)
        {
            taken.push(again);
        }
        let fifo = queue.fifo;
        let watched = !queue.watchers.is_empty();
        let mut owed = Vec::new();
        let mut notes = Vec::new();
        let mut received = Vec::with_capacity(taken.len());
        for (index, taken) in taken.into_iter().enumerate() {
            let message = taken.data;
            let receipt = Receipt {
                message_id: &message.id,
                seq: taken.seq,
                receive_count: taken.receive_count,
            }
            .to_string();
            notes.push((
                message.id.clone(),
                Change::Received {
                    receipt_handle: receipt.clone(),
                    receive_count: taken.receive_count,
                    visibility,
                    duplicate: index >= handed_out,
                },
            ));
            if let Some(observer) = &observer
                && let Some(stored) = queue.messages.get_mut(taken.seq)
            {
                if !stored.counted && watched {
                    observer.enqueued();
                    stored.counted = true;
                }
                if stored.counted {
                    stored.counted = false;
                    owed.push((message.id.clone(), taken.receive_count));
                }
            }
            let mut attributes = HashMap::from([
                (
                    "ApproximateReceiveCount".to_owned(),
                    taken.receive_count.to_string(),
                ),
                (
                    "SentTimestamp".to_owned(),
                    millis(message.sent_at).to_string(),
                ),
                (
                    "ApproximateFirstReceiveTimestamp".to_owned(),
                    taken.first_receive_millis.to_string(),
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
            attributes.retain(|name, _| asked_for(request.system_attributes, name));
            received.push(ReceivedMessage {
                message_id: message.id,
                receipt_handle: receipt,
                body: message.body,
                attributes,
                message_attributes: message.attributes.into_iter().collect(),
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
        if let Some(dead_letter) = state.dead_letter(name, now) {
            self.refresh(state, &dead_letter);
        }
        state.owed.extend(owed);
        for (message_id, change) in notes {
            state.note(name, &message_id, change);
        }
        if !received.is_empty() {
            self.wake_after(state, name, Duration::from_secs(u64::from(visibility)));
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
            let Some(receipt) = Receipt::parse(handle) else {
                results.push(entry_failure(
                    "ReceiptHandleIsInvalid",
                    format!("the receipt handle {handle} is not valid"),
                ));
                continue;
            };
            // An older handle of a message received again, or one of a message already
            // deleted: SQS answers success, and nothing is deleted.
            let removed = if queue.holds(&receipt) {
                queue.forget_attempts_of(handle);
                queue.messages.delete(receipt.seq, receipt.receive_count)
            } else {
                None
            };
            if let Some(message) = &removed
                && message.counted
                && let Some(observer) = &observer
            {
                observer.consumed();
            }
            notes.push((
                receipt.message_id.to_owned(),
                Change::Deleted {
                    receipt_handle: (*handle).to_owned(),
                    removed: removed.is_some(),
                },
            ));
            results.push(EntryResult::Ok);
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
            let timeout = Duration::from_secs(u64::from(*seconds));
            let changed = match Receipt::parse(handle) {
                Some(receipt) if queue.holds(&receipt) => queue
                    .messages
                    .change_visibility(receipt.seq, receipt.receive_count, now, timeout)
                    .map(|_| receipt.message_id),
                _ => Err(ModelError::new(
                    ErrorKind::ReceiptHandleIsInvalid,
                    format!(
                        "the receipt handle {handle} is not the latest of a message in the queue"
                    ),
                )),
            };
            match changed {
                Ok(message_id) => {
                    queue.forget_attempts_of(handle);
                    notes.push((
                        message_id.to_owned(),
                        Change::VisibilityChanged {
                            receipt_handle: (*handle).to_owned(),
                            seconds: *seconds,
                        },
                    ));
                    if *seconds > 0 {
                        wakes.push(timeout);
                    }
                    results.push(EntryResult::Ok);
                }
                Err(error) => results.push(entry_failure(error.kind.code(), error.message)),
            }
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
        check_batch_size(entries.iter().map(SendEntry::size).sum())?;
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
