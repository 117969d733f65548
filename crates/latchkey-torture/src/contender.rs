//! What a torture worker contends for: a lock (the default workload), an
//! election (`--workload election`), a semaphore of one permit
//! (`--workload semaphore`) or a read-write lock's write side (`--workload
//! rwlock`), behind one interface, so that the worker's loop, the faults
//! and the checker are the same for all.
//!
//! An election's leadership maps onto a hold: the term is the fencing
//! token, `lost()` and the deadline are the lease's, and resigning is
//! releasing. A semaphore of N = 1 and a writer must exclude exactly as a
//! lock does; their fencing tokens come with the hold.

use std::time::{Duration, Instant};

use latchkey::{
    Election, Leadership, Lock, LockGuard, Ownership, PermitGuard, RwGuard, RwLock, Semaphore,
};

/// A lock or an election.
pub(crate) enum Contender {
    Lock(Lock),
    Election(Election),
    Semaphore(Semaphore),
    Writer(RwLock),
}

/// A held lock or a leadership.
pub(crate) enum Hold {
    Lock(LockGuard),
    Leader(Leadership),
    Permit(PermitGuard),
    Write(RwGuard),
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
            Contender::Semaphore(semaphore) => {
                semaphore.acquire_timeout(wait).await.map(Hold::Permit)
            }
            Contender::Writer(rwlock) => rwlock.write_timeout(wait).await.map(Hold::Write),
        }
    }
}

/// Every hold has the same surface (one lease under all of them): call
/// `$call` on whichever this is.
macro_rules! on_each {
    ($hold:expr, $h:ident => $call:expr) => {
        match $hold {
            Hold::Lock($h) => $call,
            Hold::Leader($h) => $call,
            Hold::Permit($h) => $call,
            Hold::Write($h) => $call,
        }
    };
}

impl Hold {
    /// The fencing token: the lock's, the permit's or the writer's (made
    /// `with_fencing` or issued now), or the term.
    pub(crate) async fn fencing_token(&self) -> latchkey::Result<u64> {
        on_each!(self, h => h.fencing_token().await)
    }

    pub(crate) fn deadline(&self) -> Instant {
        on_each!(self, h => h.deadline())
    }

    pub(crate) fn is_held(&self) -> bool {
        on_each!(self, h => h.is_held())
    }

    pub(crate) async fn lost(&self) {
        on_each!(self, h => h.lost().await)
    }

    /// Releases the lock, the permit or the write hold, or resigns.
    pub(crate) async fn release(self) -> latchkey::Result<Ownership> {
        on_each!(self, h => h.release().await)
    }
}
