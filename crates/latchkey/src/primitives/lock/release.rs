//! The local hand-off policy (layer 4): when a release wakes this process's
//! own waiters for the same lock. Waiters in other processes are woken by
//! the release's message (when a waiter marked the holder's token); waiters
//! of this client are woken here, through the name's local slot (which
//! they all listen to), without waiting for that message.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;

use tracing::Instrument;

use crate::backend::{release_span, Backend};
use crate::transport::local_queues::LocalSlot;
use crate::vocab::error::Result;
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::LockKeys;
use crate::vocab::outcome::Ownership;
use crate::vocab::token::short;

/// Owner-only release that wakes this process's next waiter on the lock.
///
/// On an ordered backend (one connection to one server) the waiter is woken
/// as soon as the release is written, before its reply is back: the
/// waiter's attempt travels on the same connection right behind the
/// release, and Redis runs them in order, so a local hand-off costs one
/// round trip, not two. A wake-up for a release that then fails is
/// harmless: the waiter finds the lock busy and waits again. Elsewhere
/// (Redlock), and for cleanup releases, the waiter is woken once the lock
/// is known to be free.
pub(crate) async fn release(
    backend: &Backend,
    keys: &LockKeys,
    local: &LocalSlot,
    token: &str,
    cleanup: bool,
) -> Result<Ownership> {
    let mut release = std::pin::pin!(backend.release(keys, token, cleanup));
    if backend.is_ordered() && !cleanup {
        let first_poll = std::future::poll_fn(|cx| Poll::Ready(release.as_mut().poll(cx))).await;
        if let Poll::Ready(outcome) = first_poll {
            return woken_if_free(local, outcome);
        }
        local.wake();
        return release.await;
    }
    woken_if_free(local, release.await)
}

fn woken_if_free(local: &LocalSlot, outcome: Result<Ownership>) -> Result<Ownership> {
    if matches!(outcome, Ok(Ownership::Owned)) {
        local.wake();
    }
    outcome
}

/// Best-effort compare-and-delete on a tokio runtime, if there is one.
/// `counted`: the label under which to count the release in the metrics
/// (a held guard's), or `None` for a lock we never knew we held. Transient
/// errors (an outage, a failover) are retried by the one failure policy
/// until `until` (the hold's deadline: after it the lock frees itself), so
/// a drop during a Redis restart still frees the lock when Redis is back;
/// at least one try is made.
pub(crate) fn release_in_background(
    backend: Backend,
    keys: Arc<LockKeys>,
    local: Arc<LocalSlot>,
    token: String,
    why: &'static str,
    counted: Option<LockLabel>,
    until: std::time::Instant,
) {
    if tokio::runtime::Handle::try_current().is_err() {
        tracing::warn!(
            why,
            "no tokio runtime to release the lock on; it frees itself at its TTL"
        );
        return;
    }
    // A fair lock's keys include its queue: the span says which kind it is
    // even when the release is not counted.
    let kind = if keys.fair.is_some() {
        "fair-lock"
    } else {
        "lock"
    };
    let span = release_span(kind, &keys.key[backend.prefix().len()..], &token);
    let tracker = backend.background().clone();
    tracker.spawn(
        async move {
            let result = crate::vocab::retry::until_deadline(until, &why, || {
                release(&backend, &keys, &local, &token, true)
            })
            .await;
            if let Some(label) = &counted {
                crate::vocab::metrics::release_outcome(label, result.as_ref().ok().copied());
            }
            match result {
                Ok(outcome) => tracing::debug!(why, ?outcome, token = short(&token), "background release"),
                Err(e) => tracing::warn!(why, error = %e, "background release failed; the lock frees itself at its TTL"),
            }
        }
        .instrument(span),
    );
}
