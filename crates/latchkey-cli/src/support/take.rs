//! What `run` can hold, as one shape: a lock, several locks, K permits of
//! a semaphore, a read or write hold of a read-write lock. Each is a
//! [`Take`]: a first try, a wait until an instant (or for as long as it
//! takes), the words its messages use, and who holds it when it is busy.
//! `hold_run.rs` runs CMD under any of them.

use std::future::Future;
use std::time::Instant;

use latchkey::{Guard, Lock, MultiLock, RwAccess, RwLock, Semaphore};

use crate::support::target::Target;

/// Something `run` can hold.
pub(crate) trait Take {
    /// Its hold.
    type Held: Guard + 'static;

    /// One attempt: the hold, or `None` when busy.
    fn try_take(&self) -> impl Future<Output = latchkey::Result<Option<Self::Held>>>;

    /// Waits until `until` (`None`: as long as it takes); a wait that times
    /// out is `Error::WaitTimedOut`.
    fn take_until(
        &self,
        until: Option<Instant>,
    ) -> impl Future<Output = latchkey::Result<Self::Held>>;

    /// What the hold is, for messages: `lock "x"`, `its permit of semaphore "x"`.
    fn what(&self) -> String;

    /// Why it is busy, for the busy message: `lock "x" is busy (held by …)`
    /// without the wait's part. Only reads.
    fn busy(&self, target: &Target) -> impl Future<Output = String>;

    /// What was lost, when the hold has parts (several locks): `lock "b" of
    /// "a", "b"`; otherwise [`what`](Take::what). Only reads.
    fn lost_what(&self, _held: &Self::Held) -> impl Future<Output = String> {
        async { self.what() }
    }
}

impl Take for Lock {
    type Held = latchkey::LockGuard;

    fn try_take(&self) -> impl Future<Output = latchkey::Result<Option<Self::Held>>> {
        self.try_acquire()
    }

    async fn take_until(&self, until: Option<Instant>) -> latchkey::Result<Self::Held> {
        match until {
            Some(until) => self.acquire_until(until).await,
            None => self.acquire().await,
        }
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

impl Take for Locks {
    type Held = latchkey::MultiGuard;

    fn try_take(&self) -> impl Future<Output = latchkey::Result<Option<Self::Held>>> {
        self.locks.try_acquire()
    }

    async fn take_until(&self, until: Option<Instant>) -> latchkey::Result<Self::Held> {
        match until {
            Some(until) => self.locks.acquire_until(until).await,
            None => self.locks.acquire().await,
        }
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
    async fn lost_what(&self, held: &Self::Held) -> String {
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
    pub(crate) semaphore: Semaphore,
    pub(crate) take: u32,
}

impl Take for Permits {
    type Held = latchkey::PermitGuard;

    fn try_take(&self) -> impl Future<Output = latchkey::Result<Option<Self::Held>>> {
        self.semaphore.try_acquire_many(self.take)
    }

    async fn take_until(&self, until: Option<Instant>) -> latchkey::Result<Self::Held> {
        match until {
            Some(until) => self.semaphore.acquire_many_until(self.take, until).await,
            None => self.semaphore.acquire_many(self.take).await,
        }
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
    pub(crate) rw: RwLock,
    pub(crate) access: RwAccess,
}

impl Take for RwHold {
    type Held = latchkey::RwGuard;

    async fn try_take(&self) -> latchkey::Result<Option<Self::Held>> {
        match self.access {
            RwAccess::Read => self.rw.try_read().await,
            RwAccess::Write => self.rw.try_write().await,
        }
    }

    async fn take_until(&self, until: Option<Instant>) -> latchkey::Result<Self::Held> {
        match (self.access, until) {
            (access, Some(until)) => self.rw.acquire_until(access, until).await,
            (RwAccess::Read, None) => self.rw.read().await,
            (RwAccess::Write, None) => self.rw.write().await,
        }
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
