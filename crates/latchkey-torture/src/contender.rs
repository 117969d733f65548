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

use latchkey::{Acquire, Guard, Ownership};

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

/// What a worker contends for, through `latchkey::Acquire`, and which of
/// [`multi_names`] it writes (`[0]`: the scenario's lock's resource only).
pub(crate) struct Contender {
    what: Box<dyn Acquire>,
    set: &'static [usize],
}

/// A held lock, leadership, permit, write hold, several locks or kept
/// hold: any of them, through `latchkey::Guard`.
pub(crate) struct Hold {
    guard: Box<dyn Guard>,
    /// Which resources its tokens are for, in the order of the hold's
    /// tokens (0: the scenario's lock's; a multi hold's others 1 and 2).
    set: &'static [usize],
}

impl Contender {
    /// A contender for one resource, the scenario's lock's.
    pub(crate) fn of(what: impl Acquire + 'static) -> Contender {
        Contender {
            what: Box::new(what),
            set: &[0],
        }
    }

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
        Ok(Contender {
            what: Box::new(locks),
            set,
        })
    }

    /// Waits at most `wait` for the hold (to be elected, for an election).
    pub(crate) async fn acquire_timeout(&self, wait: Duration) -> latchkey::Result<Hold> {
        let guard = self
            .what
            .take_until(latchkey::Deadline::after(wait))
            .await?;
        Ok(Hold {
            guard,
            set: self.set,
        })
    }
}

impl Hold {
    /// The fencing tokens of the resources this hold may write, by
    /// resource, resource 0 first: the lock's, the permit's or the writer's
    /// (made `with_fencing` or issued now), the term, a kept hold's local
    /// token, or each lock's.
    pub(crate) async fn fencing_tokens(&self) -> latchkey::Result<Vec<(usize, u64)>> {
        let tokens = self.guard.fencing_tokens().await?;
        let mut by_resource: Vec<(usize, u64)> = self.set.iter().copied().zip(tokens).collect();
        by_resource.sort_unstable();
        Ok(by_resource)
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.guard.deadline()
    }

    pub(crate) fn is_held(&self) -> bool {
        self.guard.is_held()
    }

    pub(crate) async fn lost(&self) {
        self.guard.lost().await
    }

    /// Releases the lock, the permit or the write hold, or resigns.
    pub(crate) async fn release(self) -> latchkey::Result<Ownership> {
        self.guard.release().await
    }
}
