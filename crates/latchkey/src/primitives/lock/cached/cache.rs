//! The state the clones of one [`CachedLock`](crate::CachedLock) share:
//! the kept hold behind a local mutex, the `wanted` flag, the idle
//! deadline, and the keeper task that listens for `wanted` and runs the
//! idle timer.

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
use crate::vocab::protocol::{RELEASE_REQUESTED, WANTED};

/// What the clones of one [`CachedLock`] share.
pub(super) struct Cache {
    pub(super) lock: Lock,
    pub(super) idle: Duration,
    /// The kept hold; locked by each local holder.
    pub(super) slot: Arc<tokio::sync::Mutex<Slot>>,
    /// Another process asked for the lock since the hold was taken.
    pub(super) wanted: AtomicBool,
    /// When the kept hold, idle now, is to be given back; `None` in use
    /// or when nothing is kept.
    pub(super) idle_until: Mutex<Option<Instant>>,
    /// Wakes the keeper: a new idle deadline, or the cache is gone.
    pub(super) changed: Arc<Notify>,
    /// Set once the keeper listens on the lock's channel.
    pub(super) keeper: tokio::sync::OnceCell<()>,
    /// Whether this cache told the client's local queue that the hold
    /// alive for the name is kept idle. Several caches of one name share
    /// that queue: only the one whose hold it is may take the word back
    /// (another one's acquire must find the flag set, try, and so tell
    /// the idle holder, rather than queue behind a hold that never lets go
    /// by itself).
    pub(super) marked_idle: AtomicBool,
    pub(super) metrics: CacheKeys,
}

/// The Redis hold kept, if any.
pub(super) struct Slot {
    pub(super) hold: Option<LockGuard>,
    pub(super) tracker: tokio_util::task::TaskTracker,
    /// The runtime the hold was taken on: a cache dropped outside any
    /// runtime (a plain thread, a binding's garbage collector) gives its
    /// hold back there, instead of leaving it to its TTL with nobody
    /// answering the waiters that ask for it.
    pub(super) runtime: Option<tokio::runtime::Handle>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Given back in the background, as a dropped guard would be, but
        // quietly: keeping it was the point, not a mistake.
        let Some(hold) = self.hold.take() else {
            return;
        };
        let runtime = tokio::runtime::Handle::try_current()
            .ok()
            .or_else(|| self.runtime.clone());
        match runtime {
            Some(runtime) => drop(
                self.tracker
                    .spawn_on(async move { hold.release().await }, &runtime),
            ),
            None => drop(hold),
        }
    }
}

impl Cache {
    /// Takes the lock for a local holder that owns `slot`: the kept hold if
    /// usable, else a new one from Redis (one try when `once`); with
    /// whether it came from Redis.
    pub(super) async fn take(
        self: &Arc<Self>,
        mut slot: OwnedMutexGuard<Slot>,
        deadline: Option<Instant>,
        once: bool,
    ) -> Result<Option<(OwnedMutexGuard<Slot>, bool)>> {
        self.set_idle_until(None);
        if slot.runtime.is_none() {
            slot.runtime = tokio::runtime::Handle::try_current().ok();
        }
        if let Some(hold) = &slot.hold {
            let held = hold.is_held();
            if held && !self.wanted.load(Ordering::Relaxed) {
                self.metrics.acquired(true);
                return Ok(Some((slot, false)));
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
        Ok(Some((slot, true)))
    }

    /// The kept hold is idle until `until` (`Some`), or in use or gone.
    pub(super) fn set_idle_until(&self, until: Option<Instant>) {
        *self.idle_until.lock().unwrap_or_else(|p| p.into_inner()) = until;
        self.mark_idle(until.is_some());
        self.changed.notify_one();
    }

    /// Tells the client's local queue whether our hold is kept idle; takes
    /// back only a word this cache gave (see `marked_idle`).
    fn mark_idle(&self, idle: bool) {
        if idle {
            self.marked_idle.store(true, Ordering::Relaxed);
            self.lock.inner.local.keep_idle(true);
        } else if self.marked_idle.swap(false, Ordering::Relaxed) {
            self.lock.inner.local.keep_idle(false);
        }
    }

    fn idle_until(&self) -> Option<Instant> {
        *self.idle_until.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the keeper, subscribed to the lock's release channel, before
    /// the first hold is taken: a `wanted` sent right after is not missed.
    async fn listen(self: &Arc<Self>) -> Result<()> {
        self.keeper
            .get_or_try_init(|| async {
                let wakeups = crate::primitives::lease::LeaseSpec::listen(&self.lock.inner).await?;
                let (cache, changed) = (Arc::downgrade(self), self.changed.clone());
                tokio::spawn(keep(cache, changed, wakeups));
                Ok::<(), Error>(())
            })
            .await
            .map(|_| ())
    }

    /// Gives the kept hold back if it is idle (its slot free); true when it
    /// did. A hold in use keeps `wanted` set: its release gives it back.
    pub(super) async fn give_back_if_idle(&self, why: Why) -> bool {
        let Ok(mut slot) = self.slot.clone().try_lock_owned() else {
            return false;
        };
        let Some(hold) = slot.hold.take() else {
            return false;
        };
        *self.idle_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.mark_idle(false);
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
        self.mark_idle(false);
        self.metrics.given_back(Why::Flush);
        tracker.spawn(async move {
            let _ = hold.release().await;
            drop(slot);
        });
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        // The kept hold (if any) is given back as the slot drops, after this.
        self.mark_idle(false);
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
