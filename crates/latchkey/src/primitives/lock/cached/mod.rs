//! [`CachedLock`]: a lock whose Redis hold this process keeps while idle,
//! so that taking it again costs no round trip until another process
//! wants it (the idea of the VMS lock manager, GFS2's glocks and Chubby's
//! cached locks). User docs are on the type; the layout is in
//! `docs/protocol.md`, "Held while idle".
//!
//! Files: `cache.rs` (the shared state and its keeper task), `guard.rs`
//! ([`CachedGuard`]). One `Cache` per `CachedLock` (shared by its clones): a local mutex
//! over the Redis hold (local holds are exclusive, served in arrival
//! order), and a keeper task that listens on the lock's release channel
//! for `wanted` and runs the idle timer.

pub(crate) mod cache;
pub(crate) mod guard;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::primitives::lock::cached::cache::{Cache, Slot};
use crate::primitives::lock::cached::guard::CachedGuard;
use crate::primitives::lock::guard::LockGuard;
use crate::primitives::lock::Lock;
use crate::transport::kept::GiveBack;
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::{CacheKeys, GiveBack as Why};

/// A [`Lock`] whose hold is kept while idle: made by
/// [`Lock::with_caching`]. Cheap to clone; clones share the kept hold.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let lock = client
///     .lock("tenant-42", Duration::from_secs(10))?
///     .with_caching(Duration::from_secs(5))?;
/// for job in 0..1000 {
///     // The first acquire takes the lock in Redis; the next ones, while
///     // nobody else asks for it, take the hold this process kept.
///     let guard = lock.acquire().await?;
///     let _ = job; // the critical section
///     guard.release().await?; // kept: given back at once if wanted
/// }
/// client.flush(Duration::from_secs(1)).await; // gives the kept hold back
/// # Ok(()) }
/// ```
///
/// # What it promises
/// * **Exclusion is unchanged**: the Redis key is held (and renewed by the
///   watchdog) the whole time a hold is kept, so other processes see an
///   ordinary held lock; inside this process, holds are exclusive too.
/// * **Others wait little**: a waiter of another process (latchkey 0.4 or
///   later, cached or not) that marks the kept hold's token publishes
///   `wanted` in the same script; an idle hold is then given back at once,
///   one in use at its next release. Its wait is one message plus one
///   release round trip longer than an ordinary hand-off. A waiter of an
///   older version does not ask: it gets the lock when `idle` runs out.
/// * **Bounded**: a kept hold is given back after `idle` unused, by
///   [`Client::flush`](crate::Client::flush), when the last clone of the
///   lock is dropped (also outside a runtime, a binding's garbage
///   collector say: on the runtime it was taken on), and after a crash at
///   the TTL.
/// * **Fencing**: every local hold gets its own token from Redis on its
///   first [`fencing_token`](CachedGuard::fencing_token) call (one round
///   trip), or, for a lock made `with_fencing`, at its acquisition (a hold
///   taken from Redis has it from the acquiring script; one taken from the
///   kept hold asks), so tokens stay one increasing sequence that any
///   [`FencedResource`](crate::FencedResource) checks as usual.
///
/// Another lock of the same name and client (plain, or another
/// `CachedLock` that is not a clone of this one) gets an idle kept hold as
/// a waiter of another process does: its first try asks for it, which
/// costs a message and a release round trip. Clones share the kept hold
/// with no round trip: keep one `CachedLock` per name and clone it.
#[derive(Clone)]
pub struct CachedLock {
    cache: Arc<Cache>,
}

impl std::fmt::Debug for CachedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedLock")
            .field("lock", &self.cache.lock)
            .field("idle", &self.cache.idle)
            .field("kept", &self.is_kept())
            .finish()
    }
}

impl Lock {
    /// Keeps this lock's Redis hold when it is released, for up to `idle`
    /// while no other process asks for it, so that the next acquire here
    /// costs no round trip. Turns the [watchdog](Lock::with_watchdog) on
    /// when it is off (the kept hold is renewed). See [`CachedLock`].
    ///
    /// Fails with [`Error::InvalidInput`] for an `idle` of zero or above
    /// [`MAX_TTL`](crate::limits::MAX_TTL), and [`Error::Unsupported`] for a fair
    /// lock (it hands the lock on, never keeps it) and a Redlock.
    pub fn with_caching(self, idle: Duration) -> Result<CachedLock> {
        if idle.is_zero() || idle > crate::vocab::names::MAX_TTL {
            return Err(Error::InvalidInput(format!(
                "caching idle time {idle:?}: must be above zero and at most {:?}",
                crate::vocab::names::MAX_TTL
            )));
        }
        if self.inner.fair_lease.is_some() {
            return Err(Error::Unsupported("a fair lock is never kept while idle"));
        }
        let crate::backend::Backend::Single(session) = &self.inner.backend else {
            return Err(Error::Unsupported(
                "a Redlock's holds are not kept while idle",
            ));
        };
        let session = session.clone();
        let mut lock = match self.inner.lease.renew_every {
            Some(_) => self,
            None => self.with_watchdog(),
        };
        Arc::make_mut(&mut lock.inner).caching = true;
        let tracker = lock.inner.backend.background().clone();
        let cache = Arc::new(Cache {
            metrics: CacheKeys::new(&lock.inner.metrics_label),
            lock,
            idle,
            slot: Arc::new(tokio::sync::Mutex::new(Slot {
                hold: None,
                tracker,
                runtime: tokio::runtime::Handle::try_current().ok(),
            })),
            wanted: AtomicBool::new(false),
            idle_until: Mutex::new(None),
            changed: Arc::new(Notify::new()),
            keeper: tokio::sync::OnceCell::new(),
            marked_idle: AtomicBool::new(false),
        });
        let weak: Weak<dyn GiveBack> = Arc::downgrade(&cache) as Weak<dyn GiveBack>;
        session.inner.kept.register(weak);
        Ok(CachedLock { cache })
    }
}

impl CachedLock {
    /// The lock's name.
    pub fn name(&self) -> &[u8] {
        self.cache.lock.name()
    }

    /// How long a hold is kept unused.
    pub fn idle(&self) -> Duration {
        self.cache.idle
    }

    /// Whether this process keeps a Redis hold of the lock now (in use or
    /// idle). False while a local acquire takes it from Redis.
    pub fn is_kept(&self) -> bool {
        match self.cache.slot.try_lock() {
            Ok(slot) => slot.hold.as_ref().is_some_and(LockGuard::is_held),
            Err(_) => true,
        }
    }

    /// Tries once: the kept hold (no round trip) if this process keeps one
    /// and nobody else wants it, else one attempt in Redis; `Ok(None)` when
    /// someone else holds the lock, or a local holder does.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Lock::try_acquire`]: a Redis hold taken by a
    /// request whose reply was never read is released in the background.
    pub async fn try_acquire(&self) -> Result<Option<CachedGuard>> {
        let Ok(slot) = self.cache.slot.clone().try_lock_owned() else {
            return Ok(None);
        };
        match self.cache.take(slot, None, true).await? {
            Some((slot, from_redis)) => Ok(Some(
                self.fenced(CachedGuard::new(self.cache.clone(), slot, from_redis))
                    .await?,
            )),
            None => Ok(None),
        }
    }

    /// A lock made `with_fencing` issues a token with every acquisition:
    /// each local hold has its own, asked of Redis unless the hold came
    /// from Redis with it (a dropped guard gives its hold back as usual).
    async fn fenced(&self, guard: CachedGuard) -> Result<CachedGuard> {
        if self.cache.lock.inner.lease.fenced {
            guard.fencing_token().await?;
        }
        Ok(guard)
    }

    /// Waits as long as it takes. See [`CachedLock::acquire_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`CachedLock::acquire_until`].
    pub async fn acquire(&self) -> Result<CachedGuard> {
        self.acquire_by(None).await
    }

    /// Waits at most `wait`, then fails with [`Error::WaitTimedOut`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`CachedLock::acquire_until`].
    #[deprecated(
        since = "0.4.0",
        note = "use `acquire_until`, which takes a Duration (from now) as well as an Instant"
    )]
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<CachedGuard> {
        self.acquire_by(crate::primitives::wait::deadline_after(wait))
            .await
    }

    /// Waits, first behind this process's other holders (in arrival
    /// order), then, when nothing usable is kept, in Redis as
    /// [`Lock::acquire_until`] does, until `deadline` ([`Error::WaitTimedOut`]).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future while it waits behind a local
    /// holder leaves nothing behind; while it waits in Redis, as
    /// [`Lock::acquire_until`] (a hold taken unseen is released in the
    /// background). A kept hold it was giving back (wanted by another
    /// process) is given back in the background.
    pub async fn acquire_until(
        &self,
        deadline: impl Into<crate::vocab::deadline::Deadline>,
    ) -> Result<CachedGuard> {
        self.acquire_by(deadline.into().instant()).await
    }

    async fn acquire_by(&self, deadline: Option<Instant>) -> Result<CachedGuard> {
        let started = Instant::now();
        let locking = self.cache.slot.clone().lock_owned();
        let slot = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline.into(), locking)
                .await
                .map_err(|_| crate::primitives::wait::timed_out(self.name(), started))?,
            None => locking.await,
        };
        match self.cache.take(slot, deadline, false).await? {
            Some((slot, from_redis)) => {
                self.fenced(CachedGuard::new(self.cache.clone(), slot, from_redis))
                    .await
            }
            None => Err(Error::Internal("a waiting acquire came back empty".into())),
        }
    }

    /// Gives a kept idle hold back to Redis now; true when one was. A hold
    /// in use is given back at its release.
    ///
    /// # Cancel safety
    /// Cancel safe: a release already sent finishes in the background.
    pub async fn give_back(&self) -> Result<bool> {
        self.cache.wanted.store(true, Ordering::Relaxed);
        Ok(self.cache.give_back_if_idle(Why::Flush).await)
    }
}
