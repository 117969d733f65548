//! What a torture worker contends for: a lock (the default workload) or an
//! election (`--workload election`), behind one interface, so that the
//! worker's loop, the faults and the checker are the same for both.
//!
//! An election's leadership maps onto a hold: the term is the fencing
//! token, `lost()` and the deadline are the lease's, and resigning is
//! releasing.

use std::time::{Duration, Instant};

use latchkey::{Election, Leadership, Lock, LockGuard, Ownership};

/// A lock or an election.
pub(crate) enum Contender {
    Lock(Lock),
    Election(Election),
}

/// A held lock or a leadership.
pub(crate) enum Hold {
    Lock(LockGuard),
    Leader(Leadership),
}

impl Contender {
    /// Waits at most `wait` for the lock, or to be elected.
    pub(crate) async fn acquire_timeout(&self, wait: Duration, id: u32) -> latchkey::Result<Hold> {
        match self {
            Contender::Lock(lock) => lock.acquire_timeout(wait).await.map(Hold::Lock),
            Contender::Election(election) => election
                .campaign_timeout(format!("worker {id}"), wait)
                .await
                .map(Hold::Leader),
        }
    }
}

impl Hold {
    /// The fencing token: the lock's, or the term.
    pub(crate) async fn fencing_token(&self) -> latchkey::Result<u64> {
        match self {
            Hold::Lock(guard) => guard.fencing_token().await,
            Hold::Leader(leadership) => Ok(leadership.term()),
        }
    }

    pub(crate) fn deadline(&self) -> Instant {
        match self {
            Hold::Lock(guard) => guard.deadline(),
            Hold::Leader(leadership) => leadership.deadline(),
        }
    }

    pub(crate) fn is_held(&self) -> bool {
        match self {
            Hold::Lock(guard) => guard.is_held(),
            Hold::Leader(leadership) => leadership.is_leader(),
        }
    }

    pub(crate) async fn lost(&self) {
        match self {
            Hold::Lock(guard) => guard.lost().await,
            Hold::Leader(leadership) => leadership.lost().await,
        }
    }

    /// Releases the lock, or resigns.
    pub(crate) async fn release(self) -> latchkey::Result<Ownership> {
        match self {
            Hold::Lock(guard) => guard.release().await,
            Hold::Leader(leadership) => leadership.resign().await,
        }
    }
}
