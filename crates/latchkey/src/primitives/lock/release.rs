//! The local hand-off policy (layer 4): when a release wakes this process's
//! own waiters for the same lock. Waiters in other processes are woken by
//! the release's message (when a waiter marked the holder's token); waiters
//! of this client are woken here, through the name's local slot (which
//! they all listen to), without waiting for that message.

use std::future::Future;
use std::task::Poll;

use crate::backend::Backend;
use crate::transport::local_queues::LocalSlot;
use crate::vocab::error::Result;
use crate::vocab::names::LockKeys;
use crate::vocab::outcome::Ownership;

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
