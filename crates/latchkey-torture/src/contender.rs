//! What a torture worker contends for: a lock (the default workload), an
//! election (`--workload election`), a semaphore of one permit
//! (`--workload semaphore`), a read-write lock's write side (`--workload
//! rwlock`), several locks at once (`--workload multi`) or a lock kept
//! while idle by half of the workers (`--workload cached`), behind one
//! interface, so that the worker's loop, the faults and the checker are the
//! same for all.
//!
//! An election's leadership maps onto a hold: the term is the fencing
//! token, `lost()` and the deadline are the lease's, and resigning is
//! releasing. A semaphore of N = 1 and a writer must exclude exactly as a
//! lock does; their fencing tokens come with the hold.
//!
//! A multi worker holds a set of the scenario's three locks ([`MULTI_SETS`]:
//! all three, or the first with one other, each worker naming them in its
//! own order) with `Client::lock_all`, and writes each lock's resource with
//! that lock's token: every set shares the first lock (the one the faults
//! hit, whose token is the hold's), and the second and third are each
//! shared by some sets only, so the checker sees each lock's exclusion on
//! its own resource.

use std::time::{Duration, Instant};

use latchkey::{
    CachedGuard, CachedLock, Election, Leadership, Lock, LockGuard, MultiGuard, MultiLock,
    Ownership, PermitGuard, RwGuard, RwLock, Semaphore,
};

/// The sets of locks multi workers take, by worker id (modulo), as indexes
/// into [`multi_names`], in the order each names them: every set has lock
/// 0 (the faults' and the token's); locks 1 and 2 are shared by some.
pub(crate) const MULTI_SETS: [&[usize]; 3] = [&[0, 1, 2], &[2, 0], &[1, 0]];

/// The three locks of a multi workload: the scenario's lock and two more.
pub(crate) fn multi_names(lock_name: &str) -> [String; 3] {
    [
        lock_name.to_owned(),
        format!("{lock_name}:b"),
        format!("{lock_name}:c"),
    ]
}

/// The set worker `id` takes.
pub(crate) fn multi_set(id: u32) -> &'static [usize] {
    MULTI_SETS[id as usize % MULTI_SETS.len()]
}

/// A lock or an election.
pub(crate) enum Contender {
    Lock(Lock),
    Election(Election),
    Semaphore(Semaphore),
    Writer(RwLock),
    /// Several locks at once, and which of [`multi_names`] they are.
    Multi(MultiLock, &'static [usize]),
    /// A lock whose hold this worker keeps while idle.
    Cached(CachedLock),
}

/// A held lock or a leadership.
pub(crate) enum Hold {
    Lock(LockGuard),
    Leader(Leadership),
    Permit(PermitGuard),
    Write(RwGuard),
    Multi(MultiGuard, &'static [usize]),
    Cached(CachedGuard),
}

impl Contender {
    /// Worker `id`'s set of locks (`multi_set`), with its watchdog; half
    /// of the workers get the tokens with the hold, half on request.
    pub(crate) fn multi(
        client: &latchkey::Client,
        lock_name: &str,
        ttl: Duration,
        id: u32,
    ) -> latchkey::Result<Contender> {
        let set = multi_set(id);
        let all = multi_names(lock_name);
        let names: Vec<&str> = set.iter().map(|&i| all[i].as_str()).collect();
        let locks = client.lock_all(&names, ttl)?.with_watchdog();
        let locks = match id % 2 {
            0 => locks.with_fencing(),
            _ => locks,
        };
        Ok(Contender::Multi(locks, set))
    }

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
            Contender::Multi(locks, set) => locks
                .acquire_timeout(wait)
                .await
                .map(|g| Hold::Multi(g, set)),
            Contender::Cached(lock) => lock.acquire_timeout(wait).await.map(Hold::Cached),
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
            Hold::Multi($h, _) => $call,
            Hold::Cached($h) => $call,
        }
    };
}

impl Hold {
    /// The fencing tokens of the resources this hold may write, by
    /// resource (0: the scenario's lock's; a multi hold's other locks 1
    /// and 2), resource 0 first: the lock's, the permit's or the writer's
    /// (made `with_fencing` or issued now), the term, or each lock's.
    pub(crate) async fn fencing_tokens(&self) -> latchkey::Result<Vec<(usize, u64)>> {
        let (guard, set) = match self {
            Hold::Lock(h) => return Ok(vec![(0, h.fencing_token().await?)]),
            Hold::Leader(h) => return Ok(vec![(0, h.fencing_token().await?)]),
            Hold::Permit(h) => return Ok(vec![(0, h.fencing_token().await?)]),
            Hold::Write(h) => return Ok(vec![(0, h.fencing_token().await?)]),
            // Each local hold's own token, asked of Redis.
            Hold::Cached(h) => return Ok(vec![(0, h.fencing_token().await?)]),
            Hold::Multi(guard, set) => (guard, set),
        };
        let mut tokens: Vec<(usize, u64)> = set
            .iter()
            .copied()
            .zip(guard.fencing_tokens().await?)
            .collect();
        tokens.sort_unstable();
        Ok(tokens)
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
