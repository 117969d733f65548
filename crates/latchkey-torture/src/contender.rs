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

impl Hold {
    /// The fencing token: the lock's, or the term.
    pub(crate) async fn fencing_token(&self) -> latchkey::Result<u64> {
        match self {
            Hold::Lock(guard) => guard.fencing_token().await,
            Hold::Leader(leadership) => Ok(leadership.term()),
            Hold::Permit(permit) => issued(permit.fencing_token()),
            Hold::Write(write) => issued(write.fencing_token()),
        }
    }

    pub(crate) fn deadline(&self) -> Instant {
        match self {
            Hold::Lock(guard) => guard.deadline(),
            Hold::Leader(leadership) => leadership.deadline(),
            Hold::Permit(permit) => permit.deadline(),
            Hold::Write(write) => write.deadline(),
        }
    }

    pub(crate) fn is_held(&self) -> bool {
        match self {
            Hold::Lock(guard) => guard.is_held(),
            Hold::Leader(leadership) => leadership.is_leader(),
            Hold::Permit(permit) => permit.is_held(),
            Hold::Write(write) => write.is_held(),
        }
    }

    pub(crate) async fn lost(&self) {
        match self {
            Hold::Lock(guard) => guard.lost().await,
            Hold::Leader(leadership) => leadership.lost().await,
            Hold::Permit(permit) => permit.lost().await,
            Hold::Write(write) => write.lost().await,
        }
    }

    /// Releases the lock, or resigns.
    pub(crate) async fn release(self) -> latchkey::Result<Ownership> {
        match self {
            Hold::Lock(guard) => guard.release().await,
            Hold::Leader(leadership) => leadership.resign().await,
            Hold::Permit(permit) => permit.release().await,
            Hold::Write(write) => write.release().await,
        }
    }
}

/// A token issued with the hold (the semaphore and the read-write lock are
/// made `with_fencing` by the worker).
fn issued(token: Option<u64>) -> latchkey::Result<u64> {
    token.ok_or_else(|| {
        latchkey::Error::InvalidInput("no fencing token was issued with the hold".into())
    })
}
