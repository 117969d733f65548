//! What `run` can hold, as one shape: a lock, several locks, K permits of
//! a semaphore, a read or write hold of a read-write lock. Each is a
//! [`Holdable`]: the library's [`Acquire`] (a first try, a wait until an
//! instant or for as long as it takes), and the words its messages use,
//! with who holds it when it is busy. `hold_run.rs` runs CMD under any of
//! them.

use std::future::Future;

use latchkey::{Acquire, Guard, Lock, MultiGuard, MultiLock, RwAccess, RwLock, Semaphore};

use crate::support::target::Target;

/// Something `run` can hold.
pub(crate) trait Holdable {
    /// How it is acquired.
    fn acquirer(&self) -> &dyn Acquire;

    /// What the hold is, for messages: `lock "x"`, `its permit of semaphore "x"`.
    fn what(&self) -> String;

    /// Why it is busy, for the busy message: `lock "x" is busy (held by …)`
    /// without the wait's part. Only reads.
    fn busy(&self, target: &Target) -> impl Future<Output = String>;

    /// What was lost, when the hold has parts (several locks): `lock "b" of
    /// "a", "b"`; otherwise [`what`](Holdable::what). Only reads.
    fn lost_what(&self, _held: &dyn Guard) -> impl Future<Output = String> {
        async { self.what() }
    }
}

impl Holdable for Lock {
    fn acquirer(&self) -> &dyn Acquire {
        self
    }

    fn what(&self) -> String {
        format!("lock {:?}", String::from_utf8_lossy(self.name()))
    }

    async fn busy(&self, target: &Target) -> String {
        let name = String::from_utf8_lossy(self.name()).into_owned();
        let holder = crate::support::describe::holder_summary(target, &name).await;
        format!("lock {name:?} is busy{holder}")
    }
}

/// The locks of `run NAME --and NAME2 …`, with the names as given.
pub(crate) struct Locks {
    pub(crate) locks: MultiLock,
    pub(crate) names: Vec<String>,
}

impl Locks {
    fn listed(&self) -> String {
        self.names
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Holdable for Locks {
    fn acquirer(&self) -> &dyn Acquire {
        &self.locks
    }

    fn what(&self) -> String {
        format!("the locks {}", self.listed())
    }

    /// Names the first busy lock and its holder.
    async fn busy(&self, target: &Target) -> String {
        if let Ok(client) = target.client("inspect").await {
            for name in &self.names {
                if let Ok(info) = client.inspect(name).await {
                    if info.held {
                        let line = crate::support::kind_view::lock_line(&info);
                        return format!("lock {name:?} of {} is busy ({line})", self.listed());
                    }
                }
            }
        }
        format!("one of the locks {} is busy", self.listed())
    }

    /// The first lock that no longer holds our token.
    async fn lost_what(&self, held: &dyn Guard) -> String {
        let Some(held) = held.as_any().downcast_ref::<MultiGuard>() else {
            return self.what();
        };
        match held.lost_lock().await {
            Ok(Some(name)) => format!(
                "lock {:?} of the locks {}",
                String::from_utf8_lossy(&name),
                self.listed()
            ),
            _ => format!("one of the locks {}", self.listed()),
        }
    }
}

/// K permits of a semaphore (`run --permits N --take K`).
pub(crate) struct Permits {
    semaphore: Semaphore,
    take: u32,
    taking: latchkey::Permits,
}

impl Permits {
    pub(crate) fn new(semaphore: Semaphore, take: u32) -> Permits {
        let taking = semaphore.taking(take);
        Permits {
            semaphore,
            take,
            taking,
        }
    }
}

impl Holdable for Permits {
    fn acquirer(&self) -> &dyn Acquire {
        &self.taking
    }

    fn what(&self) -> String {
        let name = String::from_utf8_lossy(self.semaphore.name()).into_owned();
        match self.take {
            1 => format!("its permit of semaphore {name:?}"),
            k => format!("its {k} permits of semaphore {name:?}"),
        }
    }

    /// How many are taken, and by whom (one holder format: `kind_view.rs`).
    async fn busy(&self, _target: &Target) -> String {
        let name = String::from_utf8_lossy(self.semaphore.name()).into_owned();
        let holders = match self.semaphore.holders().await {
            Ok(holders) => {
                let named: Vec<String> = holders
                    .iter()
                    .map(|h| match &h.holder {
                        Some(who) => crate::support::kind_view::who(Some(who)),
                        None => "a foreign holder".to_owned(),
                    })
                    .collect();
                format!(" (held by {})", named.join(", "))
            }
            Err(_) => String::new(),
        };
        let n = self.semaphore.permits();
        match self.take {
            1 => format!("all {n} permits of {name:?} are taken{holders}"),
            k => format!("fewer than {k} of the {n} permits of {name:?} are free{holders}"),
        }
    }
}

/// A read or write hold of a read-write lock (`run --read`, `run --write`).
pub(crate) struct RwHold {
    rw: RwLock,
    access: RwAccess,
    side: latchkey::RwSide,
}

impl RwHold {
    pub(crate) fn new(rw: RwLock, access: RwAccess) -> RwHold {
        let side = rw.side(access);
        RwHold { rw, access, side }
    }
}

impl Holdable for RwHold {
    fn acquirer(&self) -> &dyn Acquire {
        &self.side
    }

    fn what(&self) -> String {
        let side = match self.access {
            RwAccess::Read => "read",
            RwAccess::Write => "write",
        };
        format!(
            "its {side} hold of {:?}",
            String::from_utf8_lossy(self.rw.name())
        )
    }

    async fn busy(&self, _target: &Target) -> String {
        let (side, others) = match self.access {
            RwAccess::Read => ("read", "a writer holds it or waits"),
            RwAccess::Write => ("write", "readers or a writer hold it"),
        };
        format!(
            "cannot {side} {:?}: {others}",
            String::from_utf8_lossy(self.rw.name())
        )
    }
}
