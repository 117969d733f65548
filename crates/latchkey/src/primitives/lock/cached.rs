//! [`CachedLock`]: a lock whose Redis hold this process keeps while idle,
//! so that taking it again costs no round trip until another process
//! wants it (the idea of the VMS lock manager, GFS2's glocks and Chubby's
//! cached locks). User docs are on the type; the layout is in
//! `docs/protocol.md`, "Held while idle".
//!
//! One [`Cache`] per `CachedLock` (shared by its clones): a local mutex
//! over the Redis hold (local holds are exclusive, served in arrival
//! order), and a keeper task that listens on the lock's release channel
//! for `wanted` and runs the idle timer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedMutexGuard};

use crate::primitives::lock::guard::LockGuard;
use crate::primitives::lock::Lock;
use crate::transport::kept::GiveBack;
use crate::transport::subscriber::Event;
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::{CacheKeys, GiveBack as Why};
use crate::vocab::outcome::Ownership;
use crate::vocab::protocol::{RELEASE_REQUESTED, WANTED};

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
///   lock is dropped, and after a crash at the TTL.
/// * **Fencing**: every local hold gets its own token from Redis on its
///   first [`fencing_token`](CachedGuard::fencing_token) call (one round
///   trip; the first hold of a lock made `with_fencing` has its token from
///   the acquisition), so tokens stay one increasing sequence that any
///   [`FencedResource`](crate::FencedResource) checks as usual.
///
/// A [`Lock`] of the same name in the same process (not this one or a
/// clone) waits behind a kept hold as behind any local holder, until it is
/// given back: use one `CachedLock` per name in a process.
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

/// What the clones of one [`CachedLock`] share.
struct Cache {
    lock: Lock,
    idle: Duration,
    /// The kept hold; locked by each local holder.
    slot: Arc<tokio::sync::Mutex<Slot>>,
    /// Another process asked for the lock since the hold was taken.
    wanted: AtomicBool,
    /// When the kept hold, idle now, is to be given back; `None` in use
    /// or when nothing is kept.
    idle_until: Mutex<Option<Instant>>,
    /// Wakes the keeper: a new idle deadline, or the cache is gone.
    changed: Arc<Notify>,
    /// Set once the keeper listens on the lock's channel.
    keeper: tokio::sync::OnceCell<()>,
    metrics: CacheKeys,
}

/// The Redis hold kept, if any.
struct Slot {
    hold: Option<LockGuard>,
    tracker: tokio_util::task::TaskTracker,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Given back in the background, as a dropped guard would be, but
        // quietly: keeping it was the point, not a mistake.
        if let Some(hold) = self.hold.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(_) => drop(self.tracker.spawn(async move { hold.release().await })),
                Err(_) => drop(hold),
            }
        }
    }
}

impl Lock {
    /// Keeps this lock's Redis hold when it is released, for up to `idle`
    /// while no other process asks for it, so that the next acquire here
    /// costs no round trip. Turns the [watchdog](Lock::with_watchdog) on
    /// when it is off (the kept hold is renewed). See [`CachedLock`].
    ///
    /// Fails with [`Error::InvalidInput`] for an `idle` of zero or above
    /// [`MAX_TTL`](crate::MAX_TTL), and [`Error::Unsupported`] for a fair
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
        let mut lock = match self.inner.renew_every {
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
            })),
            wanted: AtomicBool::new(false),
            idle_until: Mutex::new(None),
            changed: Arc::new(Notify::new()),
            keeper: tokio::sync::OnceCell::new(),
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
        self.cache.take(slot, None, true).await
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
    pub async fn acquire_until(&self, deadline: Instant) -> Result<CachedGuard> {
        self.acquire_by(Some(deadline)).await
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
            Some(guard) => Ok(guard),
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

impl Cache {
    /// Takes the lock for a local holder that owns `slot`: the kept hold if
    /// usable, else a new one from Redis (one try when `once`).
    async fn take(
        self: &Arc<Self>,
        mut slot: OwnedMutexGuard<Slot>,
        deadline: Option<Instant>,
        once: bool,
    ) -> Result<Option<CachedGuard>> {
        self.set_idle_until(None);
        if let Some(hold) = &slot.hold {
            let held = hold.is_held();
            if held && !self.wanted.load(Ordering::Relaxed) {
                self.metrics.acquired(true);
                return Ok(Some(CachedGuard::new(self.clone(), slot, false)));
            }
            // Wanted elsewhere (give it back first, so the other process
            // can take it), or lost.
            self.metrics
                .given_back(if held { Why::Wanted } else { Why::Lost });
            if let Some(hold) = slot.hold.take() {
                let _ = hold.release().await;
            }
        }
        self.listen().await?;
        self.wanted.store(false, Ordering::Relaxed);
        let hold = match (once, deadline) {
            (true, _) => match self.lock.try_acquire().await? {
                Some(hold) => hold,
                None => return Ok(None),
            },
            (false, deadline) => self.lock.acquire_by(deadline).await?,
        };
        slot.hold = Some(hold);
        self.metrics.acquired(false);
        Ok(Some(CachedGuard::new(self.clone(), slot, true)))
    }

    fn set_idle_until(&self, until: Option<Instant>) {
        *self.idle_until.lock().unwrap_or_else(|p| p.into_inner()) = until;
        self.changed.notify_one();
    }

    fn idle_until(&self) -> Option<Instant> {
        *self.idle_until.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the keeper, subscribed to the lock's release channel, before
    /// the first hold is taken: a `wanted` sent right after is not missed.
    async fn listen(self: &Arc<Self>) -> Result<()> {
        self.keeper
            .get_or_try_init(|| async {
                let wakeups = crate::primitives::lease::Hold::listen(&self.lock.inner).await?;
                let (cache, changed) = (Arc::downgrade(self), self.changed.clone());
                tokio::spawn(keep(cache, changed, wakeups));
                Ok::<(), Error>(())
            })
            .await
            .map(|_| ())
    }

    /// Gives the kept hold back if it is idle (its slot free); true when it
    /// did. A hold in use keeps `wanted` set: its release gives it back.
    async fn give_back_if_idle(&self, why: Why) -> bool {
        let Ok(mut slot) = self.slot.clone().try_lock_owned() else {
            return false;
        };
        let Some(hold) = slot.hold.take() else {
            return false;
        };
        *self.idle_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.wanted.store(false, Ordering::Relaxed);
        self.metrics.given_back(why);
        tracing::debug!(name = %String::from_utf8_lossy(self.lock.name()), ?why, "giving back a hold kept while idle");
        // The slot stays locked until Redis answered: a local acquire
        // meanwhile then goes to Redis after it, not into our own hold.
        let _ = hold.release().await;
        drop(slot);
        true
    }
}

impl GiveBack for Cache {
    fn give_back(&self, tracker: &tokio_util::task::TaskTracker) {
        self.wanted.store(true, Ordering::Relaxed);
        let Ok(mut slot) = self.slot.clone().try_lock_owned() else {
            return; // in use: its release gives it back
        };
        let Some(hold) = slot.hold.take() else {
            return;
        };
        *self.idle_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.metrics.given_back(Why::Flush);
        tracker.spawn(async move {
            let _ = hold.release().await;
            drop(slot);
        });
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.changed.notify_one(); // the keeper ends
    }
}

/// The keeper of one cache: gives the kept hold back when another process
/// wants it (or asks for it) and when its idle time runs out. Ends when
/// the cache is gone.
async fn keep(cache: Weak<Cache>, changed: Arc<Notify>, mut wakeups: crate::backend::Wakeups) {
    loop {
        let until = match cache.upgrade() {
            Some(cache) => cache.idle_until(),
            None => return,
        };
        let idle_over = async {
            match until {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        let why = tokio::select! {
            event = wakeups.next() => match event {
                Event::Message(m) if *m.payload == *WANTED || *m.payload == *RELEASE_REQUESTED => Why::Wanted,
                // Messages may have been missed while it reconnected.
                Event::Resubscribed => Why::Wanted,
                Event::Message(_) => continue,
            },
            _ = idle_over => Why::Idle,
            _ = changed.notified() => continue,
        };
        let Some(cache) = cache.upgrade() else {
            return;
        };
        match why {
            Why::Idle if cache.idle_until().is_none_or(|at| at > Instant::now()) => continue,
            Why::Idle => {}
            _ => cache.wanted.store(true, Ordering::Relaxed),
        }
        cache.give_back_if_idle(why).await;
    }
}

/// One local hold of a [`CachedLock`]: while it lasts nobody else, in this
/// process or another, holds the lock. Release it with
/// [`release`](CachedGuard::release); dropped, it is released the same way
/// in the background.
#[must_use = "the local hold ends (in the background) when the guard is dropped"]
pub struct CachedGuard {
    cache: Arc<Cache>,
    /// `None` once released.
    slot: Option<OwnedMutexGuard<Slot>>,
    /// Whether this local hold took the lock from Redis (its fencing token
    /// may have come with it).
    from_redis: bool,
    fencing: tokio::sync::OnceCell<u64>,
}

impl std::fmt::Debug for CachedGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedGuard")
            .field("name", &String::from_utf8_lossy(self.cache.lock.name()))
            .field("from_redis", &self.from_redis)
            .field("held", &self.is_held())
            .finish()
    }
}

impl CachedGuard {
    fn new(cache: Arc<Cache>, slot: OwnedMutexGuard<Slot>, from_redis: bool) -> CachedGuard {
        CachedGuard {
            cache,
            slot: Some(slot),
            from_redis,
            fencing: tokio::sync::OnceCell::new(),
        }
    }

    fn hold(&self) -> Option<&LockGuard> {
        self.slot.as_ref()?.hold.as_ref()
    }

    /// The lock's name.
    pub fn name(&self) -> &[u8] {
        self.cache.lock.name()
    }

    /// Whether this local hold took the lock from Redis (false: it took
    /// the hold this process kept, with no round trip).
    pub fn took_from_redis(&self) -> bool {
        self.from_redis
    }

    /// The Redis hold's owner token (the same for every local hold inside it).
    pub fn token(&self) -> &str {
        self.hold().map_or("", LockGuard::token)
    }

    /// Until when the Redis hold is proven ours (see [`LockGuard::deadline`]).
    pub fn deadline(&self) -> Instant {
        self.hold().map_or_else(Instant::now, LockGuard::deadline)
    }

    /// Whether the Redis hold is still ours (see [`LockGuard::is_held`]).
    pub fn is_held(&self) -> bool {
        self.hold().is_some_and(LockGuard::is_held)
    }

    /// Completes when the Redis hold can no longer be proven ours (see
    /// [`LockGuard::lost`]); at once for a released guard.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn lost(&self) {
        match self.hold() {
            Some(hold) => hold.lost().await,
            None => {}
        }
    }

    /// This local hold's fencing token, greater than every earlier hold's,
    /// local or not: asked of Redis on the first call (one round trip),
    /// unless this hold took the lock from Redis with its token.
    /// [`Error::NotHeld`] when the Redis hold is no longer ours.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call issues no token, or one nobody uses.
    pub async fn fencing_token(&self) -> Result<u64> {
        let not_held = || Error::NotHeld {
            name: String::from_utf8_lossy(self.name()).into_owned(),
        };
        let hold = self.hold().ok_or_else(not_held)?;
        self.fencing
            .get_or_try_init(|| async {
                match hold.issued_fencing_token().filter(|_| self.from_redis) {
                    Some(token) => Ok(token),
                    None => hold.fresh_fencing_token().await,
                }
            })
            .await
            .copied()
    }

    /// Ends this local hold. The Redis hold is kept for the next one (no
    /// round trip) unless another process wants the lock or it was lost:
    /// then it is released in Redis, and that release's finding returned.
    ///
    /// # Cancel safety
    /// Cancel safe: a release to Redis that is dropped finishes in the
    /// background; the next local holder waits for it.
    pub async fn release(mut self) -> Result<Ownership> {
        let Some(mut slot) = self.slot.take() else {
            return Ok(Ownership::Expired);
        };
        let cache = &self.cache;
        let held = slot.hold.as_ref().is_some_and(LockGuard::is_held);
        if held && !cache.wanted.load(Ordering::Relaxed) {
            cache.set_idle_until(Some(Instant::now() + cache.idle));
            return Ok(Ownership::Owned);
        }
        let Some(hold) = slot.hold.take() else {
            return Ok(Ownership::Expired);
        };
        cache.wanted.store(false, Ordering::Relaxed);
        cache
            .metrics
            .given_back(if held { Why::Wanted } else { Why::Lost });
        hold.release().await
    }
}

impl Drop for CachedGuard {
    fn drop(&mut self) {
        let Some(mut slot) = self.slot.take() else {
            return;
        };
        let cache = &self.cache;
        let held = slot.hold.as_ref().is_some_and(LockGuard::is_held);
        if held && !cache.wanted.load(Ordering::Relaxed) {
            cache.set_idle_until(Some(Instant::now() + cache.idle));
            return;
        }
        let Some(hold) = slot.hold.take() else {
            return;
        };
        cache.wanted.store(false, Ordering::Relaxed);
        cache
            .metrics
            .given_back(if held { Why::Wanted } else { Why::Lost });
        match tokio::runtime::Handle::try_current() {
            // The slot goes with the release: the next local holder waits.
            Ok(_) => drop(slot.tracker.clone().spawn(async move {
                let _ = hold.release().await;
                drop(slot);
            })),
            Err(_) => drop(hold),
        }
    }
}
