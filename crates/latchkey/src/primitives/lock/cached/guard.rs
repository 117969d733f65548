//! [`CachedGuard`]: one local hold of a [`CachedLock`](crate::CachedLock).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::OwnedMutexGuard;

use crate::primitives::guard::BoxFuture;
use crate::primitives::lock::cached::cache::{Cache, Slot};
use crate::primitives::lock::guard::LockGuard;
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::GiveBack as Why;
use crate::vocab::outcome::Ownership;

/// One local hold of a [`CachedLock`](crate::CachedLock): while it lasts nobody else, in this
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
    pub(super) fn new(
        cache: Arc<Cache>,
        slot: OwnedMutexGuard<Slot>,
        from_redis: bool,
    ) -> CachedGuard {
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
        if let Some(hold) = self.hold() {
            hold.lost().await
        }
    }

    /// The same signal as [`lost`](CachedGuard::lost), as a value (see
    /// [`LockGuard::lost_signal`]); one that never fires once released.
    pub fn lost_signal(&self) -> crate::LostSignal {
        self.hold().map(LockGuard::lost_signal).unwrap_or_default()
    }

    /// Resets the Redis hold's TTL to `ttl` from now (see
    /// [`LockGuard::extend`]).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`LockGuard::extend`].
    pub async fn extend(&self, ttl: Duration) -> Result<Ownership> {
        match self.hold() {
            Some(hold) => hold.extend(ttl).await,
            None => Ok(Ownership::Expired),
        }
    }

    /// Proves the Redis hold still ours, its expiry unchanged (see
    /// [`LockGuard::confirm`]).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`LockGuard::confirm`].
    pub async fn confirm(&self) -> Result<Ownership> {
        match self.hold() {
            Some(hold) => hold.confirm().await,
            None => Ok(Ownership::Expired),
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

    /// The lock's TTL (of the Redis hold and of its renewals).
    pub fn ttl(&self) -> Duration {
        self.cache.lock.ttl()
    }

    /// Why the Redis hold was lost (see [`LockGuard::lost_reason`]); `None`
    /// while held, and for a released guard.
    pub fn lost_reason(&self) -> Option<crate::LostReason> {
        self.hold().and_then(LockGuard::lost_reason)
    }

    /// Completes when another process asks for the lock (see
    /// [`LockGuard::release_requested`]); never for a released guard. The
    /// kept hold itself is given back when asked, at the next local release.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`LockGuard::release_requested`].
    pub async fn release_requested(&self) -> Result<()> {
        match self.hold() {
            Some(hold) => hold.release_requested().await,
            None => std::future::pending().await,
        }
    }

    /// This local hold's fencing token, if issued already. Asks nobody.
    pub fn issued_fencing_token(&self) -> Option<u64> {
        self.fencing.get().copied()
    }

    /// Gives the Redis hold up without releasing it, as
    /// [`LockGuard::forget`]: nothing is kept for the next local holder, and
    /// the lock ends at its TTL (or by a release with the returned token).
    /// Empty for a guard whose hold was already gone.
    pub fn forget(mut self) -> String {
        let Some(mut slot) = self.slot.take() else {
            return String::new();
        };
        self.cache.set_idle_until(None);
        slot.hold.take().map(LockGuard::forget).unwrap_or_default()
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
        // On the runtime the hold was taken on when dropped outside one (a
        // binding's garbage collector): not left to its TTL.
        let runtime = tokio::runtime::Handle::try_current()
            .ok()
            .or_else(|| slot.runtime.clone());
        match runtime {
            // The slot goes with the release: the next local holder waits.
            Some(runtime) => {
                let tracker = slot.tracker.clone();
                let releasing = async move {
                    let _ = hold.release().await;
                    drop(slot);
                };
                drop(tracker.spawn_on(releasing, &runtime));
            }
            None => drop(hold),
        }
    }
}

impl crate::primitives::guard::sealed::Sealed for CachedGuard {}

// The inherent methods above, boxed.
impl crate::Guard for CachedGuard {
    fn name(&self) -> &[u8] {
        CachedGuard::name(self)
    }
    fn token(&self) -> &str {
        CachedGuard::token(self)
    }
    fn ttl(&self) -> Duration {
        CachedGuard::ttl(self)
    }
    fn deadline(&self) -> Instant {
        CachedGuard::deadline(self)
    }
    fn is_held(&self) -> bool {
        CachedGuard::is_held(self)
    }
    fn lost(&self) -> BoxFuture<'_, ()> {
        Box::pin(CachedGuard::lost(self))
    }
    fn lost_signal(&self) -> crate::LostSignal {
        CachedGuard::lost_signal(self)
    }
    fn lost_reason(&self) -> Option<crate::LostReason> {
        CachedGuard::lost_reason(self)
    }
    fn release_requested(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(CachedGuard::release_requested(self))
    }
    fn extend(&self, ttl: Duration) -> BoxFuture<'_, Result<Ownership>> {
        Box::pin(CachedGuard::extend(self, ttl))
    }
    fn confirm(&self) -> BoxFuture<'_, Result<Ownership>> {
        Box::pin(CachedGuard::confirm(self))
    }
    fn fencing_token(&self) -> BoxFuture<'_, Result<u64>> {
        Box::pin(CachedGuard::fencing_token(self))
    }
    fn issued_fencing_token(&self) -> Option<u64> {
        CachedGuard::issued_fencing_token(self)
    }
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<Ownership>> {
        Box::pin(CachedGuard::release(*self))
    }
    fn forget(self: Box<Self>) -> String {
        CachedGuard::forget(*self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
