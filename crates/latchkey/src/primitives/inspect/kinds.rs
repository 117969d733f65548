//! What [`Client::describe`](crate::Client::describe) and
//! [`Client::list_all`](crate::Client::list_all) say about a name: one
//! [`PrimitiveInfo`] per kind of primitive found under it. Holders are
//! named by host, pid and time of acquisition, never by owner token (whoever
//! knows a token can release the hold).

use std::time::Duration;

pub use crate::vocab::kind::Kind;
use crate::vocab::token::Holder;

/// What Redis says about one lock at one moment; made by [`Client::inspect`](crate::Client::inspect),
/// and in [`PrimitiveInfo::Lock`] and [`FairLockInfo`] by [`Client::describe`](crate::Client::describe)
/// and [`Client::list_all`](crate::Client::list_all).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock's name (without the client's key prefix).
    pub name: Vec<u8>,
    /// Whether the lock key exists, i.e. someone holds the lock.
    pub held: bool,
    /// The remaining TTL; `None` when the lock is free, or when it is held
    /// without a TTL (a key set by another client without `PX`).
    pub ttl: Option<Duration>,
    /// The raw value of the lock key while held: the holder's owner token,
    /// followed by [`WAITING_MARK`](crate::vocab::protocol::WAITING_MARK) once a waiter asked
    /// to be woken at its release. Treat it as a secret: whoever knows it
    /// can release the lock.
    pub value: Option<Vec<u8>>,
    /// Who holds the lock, parsed from a latchkey owner token; `None` when the
    /// lock is free or held by another client (see [`value`](Self::value)).
    pub holder: Option<Holder>,
    /// How long the holder has held it: since [`Holder::acquired_at`] by
    /// our clock (zero when the holder's clock is ahead); `None` unless
    /// [`holder`](Self::holder) is known. A holder that waited in a fair
    /// queue counts from when it got the lock, not from when it queued.
    pub age: Option<Duration>,
    /// The last fencing token issued for this name: the holder's once it
    /// has one (tokens are issued with the acquisition only for locks made
    /// [`with_fencing`](crate::Lock::with_fencing), otherwise on request),
    /// else an earlier holder's; `None` when no token was ever issued.
    pub fencing_token: Option<u64>,
    /// The raw value of the fencing counter when it holds something other
    /// than a fencing token (another program wrote it; `fencing_token` is
    /// then `None`). Such a lock is still inspected and listed, so that one
    /// bad key does not hide every other lock. Deleting the counter resets
    /// it (see [`Error::BadFencingCounter`](crate::Error::BadFencingCounter)).
    pub bad_fencing_counter: Option<Vec<u8>>,
}

/// One hold or intent (a permit, a reader's or writer's hold, a queued
/// waiter, a leadership): its owner token, who (parsed from the token,
/// `None` for a token not made by latchkey) and how long it has left
/// (server time; `None` without a TTL). What [`Semaphore::holders`] and
/// every inspection return.
///
/// [`Semaphore::holders`]: crate::Semaphore::holders
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holding {
    /// The owner token, as Redis keeps it (a permit of a hold of k permits:
    /// the guard's token, then that token with `#2` … `#k` after it).
    pub token: String,
    /// Who, from the owner token; `None` for a token not made by latchkey.
    pub holder: Option<Holder>,
    /// Time left (server clock); `None` without a TTL.
    pub ttl: Option<Duration>,
}

/// A fair lock with waiters queued: the lock, and its live waiters in the
/// order they will be served.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FairLockInfo {
    /// The lock itself, as [`Client::inspect`](crate::Client::inspect) reads it.
    pub lock: LockInfo,
    /// Live waiters, head first; `ttl` is what is left of each waiter's lease.
    pub queue: Vec<Holding>,
}

/// A semaphore's unexpired permits. N is not stored in Redis (each caller
/// passes its own, `docs/protocol.md`), so it cannot be reported.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreInfo {
    /// The name (without the client's key prefix).
    pub name: Vec<u8>,
    /// The permits held now, soonest to expire first.
    pub permits: Vec<Holding>,
    /// The last fencing token issued for a permit; `None` if none ever was.
    pub fencing_token: Option<u64>,
}

/// A read-write lock's holders and waiting writers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwLockInfo {
    /// The name (without the client's key prefix).
    pub name: Vec<u8>,
    /// The writer, while one holds it.
    pub writer: Option<Holding>,
    /// The readers holding it now.
    pub readers: Vec<Holding>,
    /// Writers waiting (unexpired intents): while one waits, new readers wait too.
    pub writers_waiting: Vec<Holding>,
    /// Readers waiting (unexpired intents).
    pub readers_waiting: Vec<Holding>,
    /// Readers let in before the next writer (after a writer's release).
    pub readers_next: u64,
    /// The last writer's fencing token; `None` if none was ever issued.
    pub fencing_token: Option<u64>,
}

/// A count-down latch.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatchInfo {
    /// The name (without the client's key prefix).
    pub name: Vec<u8>,
    /// The count left; 0 once open. `None` when the key holds something
    /// other than a count.
    pub count: Option<u64>,
    /// Until the latch key expires (reset by every count-down).
    pub ttl: Option<Duration>,
}

/// A barrier's current generation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BarrierInfo {
    /// The name (without the client's key prefix).
    pub name: Vec<u8>,
    /// N, as set by the generation's first arrival (`None` before one).
    pub parties: Option<u64>,
    /// The current generation, from 0.
    pub generation: u64,
    /// Parties of this generation arrived (and waiting).
    pub arrived: u64,
    /// Until the barrier key expires (reset by every arrival).
    pub ttl: Option<Duration>,
}

/// A leader election.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ElectionInfo {
    /// The name (without the client's key prefix).
    pub name: Vec<u8>,
    /// The leader (the lease holder the state records) and its lease left;
    /// `None` when nobody leads.
    pub leader: Option<Holding>,
    /// The leader's term (its fencing token); `None` without a leader.
    pub term: Option<u64>,
    /// The value the leader proclaimed; `None` without a leader.
    pub value: Option<Vec<u8>>,
    /// The last term ever issued (kept when nobody leads).
    pub last_term: Option<u64>,
    /// The lease is held by a token the state does not record (something
    /// other than latchkey wrote it, or a campaign is mid-way).
    pub lease_unrecorded: bool,
}

/// One primitive found under a name. `#[non_exhaustive]`: more kinds may come.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrimitiveInfo {
    /// A lock.
    Lock(LockInfo),
    /// A fair lock with waiters queued.
    FairLock(FairLockInfo),
    /// A semaphore.
    Semaphore(SemaphoreInfo),
    /// A read-write lock.
    RwLock(RwLockInfo),
    /// A count-down latch.
    Latch(LatchInfo),
    /// A barrier.
    Barrier(BarrierInfo),
    /// A leader election.
    Election(ElectionInfo),
}

impl PrimitiveInfo {
    /// Which kind this is.
    pub fn kind(&self) -> Kind {
        match self {
            PrimitiveInfo::Lock(_) => Kind::Lock,
            PrimitiveInfo::FairLock(_) => Kind::FairLock,
            PrimitiveInfo::Semaphore(_) => Kind::Semaphore,
            PrimitiveInfo::RwLock(_) => Kind::RwLock,
            PrimitiveInfo::Latch(_) => Kind::Latch,
            PrimitiveInfo::Barrier(_) => Kind::Barrier,
            PrimitiveInfo::Election(_) => Kind::Election,
        }
    }

    /// The name (without the client's key prefix).
    pub fn name(&self) -> &[u8] {
        match self {
            PrimitiveInfo::Lock(i) => &i.name,
            PrimitiveInfo::FairLock(i) => &i.lock.name,
            PrimitiveInfo::Semaphore(i) => &i.name,
            PrimitiveInfo::RwLock(i) => &i.name,
            PrimitiveInfo::Latch(i) => &i.name,
            PrimitiveInfo::Barrier(i) => &i.name,
            PrimitiveInfo::Election(i) => &i.name,
        }
    }

    /// How many hold it now: 1 for a held lock or a leader, the permits of
    /// a semaphore, readers plus writer, the parties arrived at a barrier,
    /// and for a latch the count left (what it waits for).
    pub fn holders(&self) -> u64 {
        match self {
            PrimitiveInfo::Lock(i) => u64::from(i.held),
            PrimitiveInfo::FairLock(i) => u64::from(i.lock.held),
            PrimitiveInfo::Semaphore(i) => i.permits.len() as u64,
            PrimitiveInfo::RwLock(i) => i.readers.len() as u64 + u64::from(i.writer.is_some()),
            PrimitiveInfo::Latch(i) => i.count.unwrap_or(0),
            PrimitiveInfo::Barrier(i) => i.arrived,
            PrimitiveInfo::Election(i) => u64::from(i.leader.is_some()),
        }
    }

    /// Whether something holds or waits on it now: [`holders`](Self::holders)
    /// above 0, or waiters queued.
    pub fn is_active(&self) -> bool {
        self.holders() > 0 || self.waiting() > 0
    }

    /// How many wait: a fair lock's queue, a read-write lock's waiting
    /// writers and readers; 0 for the others (whose waiters keep no keys).
    pub fn waiting(&self) -> u64 {
        match self {
            PrimitiveInfo::FairLock(i) => i.queue.len() as u64,
            PrimitiveInfo::RwLock(i) => (i.writers_waiting.len() + i.readers_waiting.len()) as u64,
            _ => 0,
        }
    }

    /// The longest-held holder's age, by its wall clock against ours (for
    /// `top`'s order and the exporter's long-held list): a lock's holder, a
    /// semaphore's oldest permit, the writer or oldest reader, the leader.
    pub fn oldest(&self) -> Option<(&Holder, Duration)> {
        let holdings: Vec<&Holding> = match self {
            PrimitiveInfo::Lock(i) | PrimitiveInfo::FairLock(FairLockInfo { lock: i, .. }) => {
                return i.holder.as_ref().zip(i.age);
            }
            PrimitiveInfo::Semaphore(i) => i.permits.iter().collect(),
            PrimitiveInfo::RwLock(i) => i.writer.iter().chain(&i.readers).collect(),
            PrimitiveInfo::Election(i) => i.leader.iter().collect(),
            PrimitiveInfo::Latch(_) | PrimitiveInfo::Barrier(_) => Vec::new(),
        };
        let now = std::time::SystemTime::now();
        holdings
            .into_iter()
            .filter_map(|h| h.holder.as_ref())
            .map(|h| {
                (
                    h,
                    now.duration_since(h.acquired_at).unwrap_or(Duration::ZERO),
                )
            })
            .max_by_key(|(_, age)| *age)
    }
}
