//! Local queues: within one client, only one task per lock name contends
//! with Redis at a time.
//!
//! Without this, N tasks of one process waiting for the same lock would all
//! hit Redis on every release (N failed `SET NX` per handoff, growing with
//! waiters). With it, the others wait in a FIFO queue in memory, and Redis
//! commands per handoff stay flat however many tasks wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// One FIFO slot per lock name, shared by all tasks of a client.
#[derive(Default)]
pub(crate) struct LocalQueues {
    slots: Mutex<HashMap<Vec<u8>, Weak<Semaphore>>>,
    /// Guards of this client alive per key: while one lives, the lock is
    /// (almost certainly) ours, so newcomers queue instead of trying.
    held: Mutex<HashMap<Vec<u8>, usize>>,
}

impl LocalQueues {
    /// Waits (FIFO) until this task is the one that may contend for `key`.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled task leaves the queue without taking a turn.
    /// The semaphore is never closed, so this returns `Some`; were it ever
    /// `None`, contending without the queue is still correct, only busier.
    pub(crate) async fn turn(&self, key: &[u8]) -> Option<OwnedSemaphorePermit> {
        self.slot(key).acquire_owned().await.ok()
    }

    /// True while some task of this client holds its turn for `key` or a
    /// guard for it: the lock is then (almost certainly) busy, and a
    /// newcomer should queue rather than spend a round trip to learn that.
    pub(crate) fn is_contended(&self, key: &[u8]) -> bool {
        if lock(&self.held).contains_key(key) {
            return true;
        }
        lock(&self.slots)
            .get(key)
            .and_then(Weak::upgrade)
            .is_some_and(|slot| slot.available_permits() == 0)
    }

    /// A guard for `key` was made.
    pub(crate) fn hold(&self, key: &[u8]) {
        *lock(&self.held).entry(key.to_vec()).or_insert(0) += 1;
    }

    /// A guard for `key` is gone (released or dropped).
    pub(crate) fn unhold(&self, key: &[u8]) {
        let mut held = lock(&self.held);
        if let Some(n) = held.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                held.remove(key);
            }
        }
    }

    fn slot(&self, key: &[u8]) -> Arc<Semaphore> {
        let mut slots = lock(&self.slots);
        if let Some(slot) = slots.get(key).and_then(Weak::upgrade) {
            return slot;
        }
        // Forget slots nobody waits on any more, so the map does not grow
        // with every name ever locked. Amortized: only when we insert.
        if slots.len() >= 64 && slots.len().is_power_of_two() {
            slots.retain(|_, slot| slot.strong_count() > 0);
        }
        let slot = Arc::new(Semaphore::new(1));
        slots.insert(key.to_vec(), Arc::downgrade(&slot));
        slot
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The maps hold no invariant a panic elsewhere could break halfway.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
