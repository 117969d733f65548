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

    /// True while some task of this client holds its turn for `key`: the
    /// lock is then (almost certainly) busy, and a newcomer should queue.
    pub(crate) fn is_contended(&self, key: &[u8]) -> bool {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .get(key)
            .and_then(Weak::upgrade)
            .is_some_and(|slot| slot.available_permits() == 0)
    }

    fn slot(&self, key: &[u8]) -> Arc<Semaphore> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
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
