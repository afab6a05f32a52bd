//! The one batch driver, under settlement's lanes and the publisher's destinations alike.
//!
//! [`drive`] is the loop that runs a batching state: at each turn it asks the state (under its
//! lock, with `now`) for the batches due, hands each to its call, and sleeps until the state's
//! next deadline or a wake-up; it returns once the state is done.
//!
//! [`send_per_entry`] is a batch's call: the service answers its entries one by one, and the
//! call is made again for the entries that failed transiently, under a backoff's budget.

use std::future::Future;

use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::time::Instant;

use crate::api::{CallError, CallErrorKind, EntryFailure, EntryResult};
use crate::sqs::backoff::Backoff;
use crate::sqs::caught::caught;
use crate::sqs::sleep::sleep_until_or_forever;

/// What a batching state answers at one turn of [`drive`].
#[derive(Debug)]
pub(crate) struct Due<B> {
    /// The batches that go out now.
    pub(crate) batches: Vec<B>,
    /// When the next one may fall due without a wake-up; `None`: only a wake-up brings one.
    pub(crate) next: Option<Instant>,
    /// Whether the state is done: nothing waits, and nothing more will come.
    pub(crate) done: bool,
}

/// A batching state and its calls, as [`drive`] runs them.
pub(crate) trait Driven: Sync {
    /// A batch that goes out in one call.
    type Batch;

    /// The batches due at `now`, taken under the state's lock.
    fn poll(&self, now: Instant) -> Due<Self::Batch>;

    /// Starts the call of `batch`, on a task of its own: the loop does not wait for it.
    fn send(&self, batch: Self::Batch);

    /// Notified when something new may be due: a push, an answer, a drain.
    fn wake(&self) -> &Notify;

    /// After a wake-up, before the next turn; nothing by default.
    fn after_wake(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Runs `driven` until its state is done (see the module's documentation).
///
/// # Cancel safety
///
/// Dropped between turns, no batch is lost that was taken: each was handed to its call at the
/// turn that took it.
pub(crate) async fn drive<D: Driven>(driven: &D) {
    loop {
        let due = driven.poll(Instant::now());
        for batch in due.batches {
            driven.send(batch);
        }
        if due.done {
            return;
        }
        // Biased: every branch only loops back, and a fixed order keeps a run on a paused clock
        // the same from one seed to the next.
        tokio::select! {
            biased;
            () = driven.wake().notified() => driven.after_wake().await,
            () = sleep_until_or_forever(due.next) => {}
        }
    }
}

/// What became of one entry of a batch call, for good.
#[derive(Debug)]
pub(crate) enum EntryAnswer {
    /// The service applied it.
    Applied,
    /// The service refused it for a reason that sending it again cannot mend.
    Refused(EntryFailure),
    /// The service failed it transiently at the last attempt the budget allows.
    GaveUp {
        failure: EntryFailure,
        attempts: u32,
    },
    /// Its call failed: in a way retrying cannot mend, or at the last attempt the budget
    /// allows.
    CallFailed { error: CallError, attempts: u32 },
}

/// One kind of batch call whose entries the service answers one by one: how to make it, and
/// what to do with its answers.
pub(crate) trait BatchCall {
    /// What the call carries for an entry.
    type Entry;
    /// Who waits for an entry's answer: kept beside the entry, never sent.
    type Waiter;

    /// Makes the call for `entries`, at `sent_at`.
    fn call<'a>(
        &'a self,
        entries: &'a [Self::Entry],
        sent_at: Instant,
    ) -> impl Future<Output = Result<Vec<EntryResult>, CallError>> + Send + 'a;

    /// A call of `entries` made at `sent_at` is over: succeeded (`ok`, whatever its entries'
    /// answers) or failed.
    fn called(&self, ok: bool, entries: usize, sent_at: Instant);

    /// An entry's answer, for good, from the call made at `sent_at`.
    fn answer(
        &self,
        entry: Self::Entry,
        waiter: Self::Waiter,
        answer: EntryAnswer,
        sent_at: Instant,
    );

    /// `entry` failed transiently and goes out again.
    fn entry_retried(&self, _entry: &Self::Entry, _failure: &EntryFailure) {}

    /// A call failed: made `again` (its entries wait for the next attempt), or for good.
    fn call_failed(&self, error: &CallError, attempt: u32, again: bool, entries: usize);

    /// `entries` entries go out again after a backoff.
    fn retrying(&self, _entries: usize) {}

    /// Waits for the turn of a call that got no answer (which may still be queued at the
    /// server) to be made again, when calls of this kind take turns so: the turn is held until
    /// the next attempt's answer. `None`: no turns, the retry goes after its backoff.
    fn retry_turn(&self) -> impl Future<Output = Option<OwnedSemaphorePermit>> + Send {
        async { None }
    }

    /// Why `entry` must not be sent at `now` (what it asks for can no longer be had), if so:
    /// it is answered with that error instead, as its call's failure. Asked before every send.
    fn lapsed(&self, _entry: &Self::Entry, _now: Instant) -> Option<CallError> {
        None
    }
}

/// Answers the entries that have [`BatchCall::lapsed`] at `now` with their call's failure
/// (after the `attempt - 1` calls made for them), and returns the others.
fn answer_lapsed<C: BatchCall>(
    call: &C,
    entries: Vec<C::Entry>,
    waiters: Vec<C::Waiter>,
    attempt: u32,
    now: Instant,
) -> (Vec<C::Entry>, Vec<C::Waiter>) {
    let mut kept = (
        Vec::with_capacity(entries.len()),
        Vec::with_capacity(waiters.len()),
    );
    for (entry, waiter) in entries.into_iter().zip(waiters) {
        match call.lapsed(&entry, now) {
            Some(error) => {
                let answer = EntryAnswer::CallFailed {
                    error,
                    attempts: attempt - 1,
                };
                call.answer(entry, waiter, answer, now);
            }
            None => {
                kept.0.push(entry);
                kept.1.push(waiter);
            }
        }
    }
    kept
}

/// Makes `call` for `entries` (each with its waiter, in the same order), and again for the
/// entries that failed transiently or whose call did, until each has its answer or the attempts
/// `backoff` allows are used, sleeping a jittered delay between attempts. Every entry gets
/// exactly one [`BatchCall::answer`]. A panic in the call is the call's failure.
///
/// # Cancel safety
///
/// Not cancel safe: entries not answered yet when it is dropped are never answered.
pub(crate) async fn send_per_entry<C: BatchCall>(
    call: &C,
    backoff: &Backoff,
    mut entries: Vec<C::Entry>,
    mut waiters: Vec<C::Waiter>,
) {
    debug_assert_eq!(entries.len(), waiters.len(), "a waiter per entry");
    let mut attempt: u32 = 1;
    // Held from a retry's turn (see BatchCall::retry_turn) to its answer.
    let mut turn: Option<OwnedSemaphorePermit> = None;
    while !entries.is_empty() {
        let sent_at = Instant::now();
        (entries, waiters) = answer_lapsed(call, entries, waiters, attempt, sent_at);
        if entries.is_empty() {
            break;
        }
        let result = caught(call.call(&entries, sent_at)).await;
        drop(turn.take());
        call.called(result.is_ok(), entries.len(), sent_at);
        let budget_left = attempt < backoff.max_attempts();
        let mut retry = Vec::new();
        let mut retry_waiters = Vec::new();
        let no_answer = result
            .as_ref()
            .is_err_and(|error| error.kind == CallErrorKind::Network);
        match result {
            Ok(results) => {
                let mut results = results.into_iter();
                for (entry, waiter) in entries.into_iter().zip(waiters) {
                    let answer = match results
                        .next()
                        .unwrap_or_else(|| EntryResult::Failed(EntryFailure::missing()))
                    {
                        EntryResult::Ok => EntryAnswer::Applied,
                        EntryResult::Failed(failure) if failure.is_transient() && budget_left => {
                            call.entry_retried(&entry, &failure);
                            retry.push(entry);
                            retry_waiters.push(waiter);
                            continue;
                        }
                        EntryResult::Failed(failure) if failure.is_transient() => {
                            EntryAnswer::GaveUp {
                                failure,
                                attempts: attempt,
                            }
                        }
                        EntryResult::Failed(failure) => EntryAnswer::Refused(failure),
                    };
                    call.answer(entry, waiter, answer, sent_at);
                }
            }
            Err(error) if error.is_transient() && budget_left => {
                call.call_failed(&error, attempt, true, entries.len());
                retry = entries;
                retry_waiters = waiters;
            }
            Err(error) => {
                call.call_failed(&error, attempt, false, entries.len());
                for (entry, waiter) in entries.into_iter().zip(waiters) {
                    let answer = EntryAnswer::CallFailed {
                        error: error.clone(),
                        attempts: attempt,
                    };
                    call.answer(entry, waiter, answer, sent_at);
                }
            }
        }
        if !retry.is_empty() {
            call.retrying(retry.len());
            tokio::time::sleep(backoff.jittered(attempt)).await;
            if no_answer {
                turn = call.retry_turn().await;
            }
            attempt += 1;
        }
        entries = retry;
        waiters = retry_waiters;
    }
}
