//! Local queues: within one client, only one task per lock name contends
//! with Redis at a time.
//!
//! Without this, N tasks of one process waiting for the same lock would all
//! hit Redis on every release (N failed `SET NX` per handoff, growing with
//! waiters). With it, the others wait in a FIFO queue in memory, and Redis
//! commands per handoff stay flat however many tasks wait.
//!
//! Every [`Lock`](crate::Lock) looks its name's [`LocalSlot`] up once, when
//! it is made, and keeps it: acquiring and releasing then touch two atomics,
//! not a map (a map lookup and a key copy per guard cost more than the rest
//! of a guard's bookkeeping).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::futures::Notified;
use tokio::sync::{Notify, Semaphore, SemaphorePermit};

/// The slots of one client, by lock key.
#[derive(Default)]
pub(crate) struct LocalQueues {
    slots: Mutex<HashMap<Vec<u8>, Weak<LocalSlot>>>,
}

impl LocalQueues {
    /// The slot of `key`, shared by every `Lock` of this client with that key.
    pub(crate) fn slot(&self, key: &[u8]) -> Arc<LocalSlot> {
        // The map holds no invariant a panic elsewhere could break halfway.
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.get(key).and_then(Weak::upgrade) {
            return slot;
        }
        // Forget slots no `Lock` uses any more, so the map does not grow with
        // every name ever locked. Amortized: only when we insert.
        if slots.len() >= 64 && slots.len().is_power_of_two() {
            slots.retain(|_, slot| slot.strong_count() > 0);
        }
        let slot = Arc::new(LocalSlot {
            turn: Semaphore::new(1),
            held: AtomicUsize::new(0),
            released: Notify::new(),
            releases: AtomicUsize::new(0),
            arriving: AtomicUsize::new(0),
            kept_idle: AtomicBool::new(false),
        });
        slots.insert(key.to_vec(), Arc::downgrade(&slot));
        slot
    }
}

/// What the tasks of one client share about one lock name.
pub(crate) struct LocalSlot {
    /// One permit: the turn to contend with Redis, handed out FIFO.
    turn: Semaphore,
    /// Guards of this client alive for the name: while one lives, the lock
    /// is (almost certainly) ours, so newcomers queue instead of trying.
    held: AtomicUsize,
    /// Told when a guard of this client releases the lock, or the last one
    /// is gone: a waiter behind a holder of its own client waits for this,
    /// not for pub/sub (see `primitives/lock/wait.rs`).
    released: Notify,
    /// Counts what `released` was told: a waiter whose first try found the
    /// lock busy sees from it whether a guard of this client let go since
    /// (the try then likely met that guard; see `primitives/lock/wait.rs`).
    releases: AtomicUsize,
    /// First tries of `acquire` in flight: one that finds the lock busy
    /// may have met another of them, which is about to hold it.
    arriving: AtomicUsize,
    /// The guard alive here is a hold kept while idle by a cache of this
    /// client (`primitives/lock/cached/`): it lets go only when told the
    /// lock is wanted, so a newcomer tries (and tells it) instead of
    /// queueing behind it.
    kept_idle: AtomicBool,
}

impl LocalSlot {
    /// Waits (FIFO) until this task is the one that may contend.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled task leaves the queue without taking a turn.
    /// The semaphore is never closed, so this returns `Some`; were it ever
    /// `None`, contending without the queue is still correct, only busier.
    pub(crate) async fn turn(&self) -> Option<SemaphorePermit<'_>> {
        self.turn.acquire().await.ok()
    }

    /// True while some task of this client holds its turn or a guard: the
    /// lock is then (almost certainly) busy, and a newcomer should queue
    /// rather than spend a round trip to learn that.
    pub(crate) fn is_contended(&self) -> bool {
        self.held.load(Ordering::Relaxed) > 0 || self.turn.available_permits() == 0
    }

    /// Whether this client's guard is a hold kept idle.
    pub(crate) fn is_kept_idle(&self) -> bool {
        self.kept_idle.load(Ordering::Relaxed)
    }

    /// This client's cache keeps its hold idle (`true`) or uses it again.
    pub(crate) fn keep_idle(&self, idle: bool) {
        self.kept_idle.store(idle, Ordering::Relaxed);
    }

    /// A guard was made.
    pub(crate) fn hold(&self) {
        self.held.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a first try in flight until the returned value is dropped.
    pub(crate) fn arrive(&self) -> Arriving<'_> {
        self.arriving.fetch_add(1, Ordering::Relaxed);
        Arriving(self)
    }

    /// Whether a guard of this client holds the lock, is about to (a first
    /// try in flight), or a task of this client waits for its turn ahead of
    /// us: a waiter is then behind its own client, which wakes it.
    pub(crate) fn is_local_ahead(&self) -> bool {
        self.is_contended() || self.arriving.load(Ordering::Relaxed) > 0
    }

    /// True while a guard of this client is alive for the name: the lock
    /// is then held here (unless that guard lost it).
    pub(crate) fn is_held(&self) -> bool {
        self.held.load(Ordering::Relaxed) > 0
    }

    /// A guard is gone (released or dropped). The last one tells the
    /// waiters: whatever holds the lock now, it is not this client.
    pub(crate) fn unhold(&self) {
        if self.held.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.wake();
        }
    }

    /// A guard of this client released the lock (or its release is on its
    /// way, ahead of anything sent after this: see `primitives/lock/release.rs`).
    pub(crate) fn wake(&self) {
        self.releases.fetch_add(1, Ordering::Relaxed);
        self.released.notify_waiters();
    }

    /// How many times [`wake`](Self::wake) or the last
    /// [`unhold`](Self::unhold) ran: a hint (`Relaxed`), compared before and
    /// after an attempt.
    pub(crate) fn releases(&self) -> usize {
        self.releases.load(Ordering::Relaxed)
    }

    /// Completes at the next [`wake`](Self::wake) or last
    /// [`unhold`](Self::unhold) after it is enabled (`Notified::enable`) or
    /// first polled.
    pub(crate) fn released(&self) -> Notified<'_> {
        self.released.notified()
    }
}

/// A first try in flight (see [`LocalSlot::arrive`]).
pub(crate) struct Arriving<'a>(&'a LocalSlot);

impl Drop for Arriving<'_> {
    fn drop(&mut self) {
        self.0.arriving.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_of_one_name_share_a_slot_and_unused_slots_are_forgotten() {
        let queues = LocalQueues::default();
        let a = queues.slot(b"a");
        assert!(Arc::ptr_eq(&a, &queues.slot(b"a")));
        assert!(!Arc::ptr_eq(&a, &queues.slot(b"b")));
        a.hold();
        assert!(queues.slot(b"a").is_contended());
        a.unhold();
        assert!(!a.is_contended());
        // Names nobody keeps are swept once the map reaches 64 entries.
        for i in 0..100 {
            let _ = queues.slot(format!("gone{i}").as_bytes());
        }
        let len = queues.slots.lock().map(|s| s.len()).unwrap_or(0);
        assert!(len < 64, "{len} slots kept for 102 names, 1 of them used");
        assert!(
            Arc::ptr_eq(&a, &queues.slot(b"a")),
            "a used slot survives a sweep"
        );
    }
}
