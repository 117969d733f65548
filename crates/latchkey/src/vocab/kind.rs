//! The kinds of primitive (layer 1): one enum, for what inspection reports
//! (`latchkey::Kind`) and for the `kind` label of every metric, so that
//! the two cannot disagree.

use std::fmt;

/// The seven kinds of primitive, in the order [`Client::describe`](crate::Client::describe)
/// reports them when a name is several at once (their keys differ, so one
/// name can be a lock and a semaphore).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A lock ([`Client::lock`](crate::Client::lock)), without waiters queued.
    Lock,
    /// A fair lock with waiters queued ([`Lock::fair`](crate::Lock::fair)). A
    /// fair lock nobody waits for keeps no queue, so it shows as a [`Kind::Lock`].
    FairLock,
    /// A semaphore ([`Client::semaphore`](crate::Client::semaphore)).
    Semaphore,
    /// A read-write lock ([`Client::rwlock`](crate::Client::rwlock)).
    RwLock,
    /// A count-down latch ([`Client::latch`](crate::Client::latch)).
    Latch,
    /// A barrier ([`Client::barrier`](crate::Client::barrier)).
    Barrier,
    /// A leader election ([`Client::election`](crate::Client::election)).
    Election,
}

impl Kind {
    /// The kind's name in `latchkey list`, `--json` and the exporter's
    /// `kind` label: `lock`, `fair-lock`, `semaphore`, `rwlock`, `latch`,
    /// `barrier`, `election`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::FairLock => "fair-lock",
            Kind::Semaphore => "semaphore",
            Kind::RwLock => "rwlock",
            Kind::Latch => "latch",
            Kind::Barrier => "barrier",
            Kind::Election => "election",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
