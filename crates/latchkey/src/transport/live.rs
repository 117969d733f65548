//! The holds a client has out, kept weakly: what
//! [`Client::close`](crate::Client::close) gives back (etcd's
//! `Session.Close`, which revokes every key of the session at once). A hold
//! enters when it is taken and leaves when it ends (released, forgotten,
//! dropped); the registry never keeps one alive. Beside them, the holds
//! the client *keeps* ([`Client::keep`](crate::Client::keep)), strongly:
//! those live until released, forgotten, found lost or closed, whoever
//! else lets go of them.

use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, Weak};

/// A live hold, as a close ends it.
pub(crate) trait Live: Send + Sync {
    /// Marks the hold ended by the close (lost, reason `Closed`) and
    /// releases it in the background, tracked where every background
    /// release is (the close then waits for them as `flush` does); nothing
    /// when it had ended already.
    fn close(&self);
    /// Over for good (released, forgotten or lost): a kept hold the
    /// registry may let go of.
    fn ended(&self) -> bool {
        false
    }
}

/// The hash of an id the registry made (a counter, never a user's): one
/// multiplication. SipHash, which resists keys chosen to collide, cost 3 %
/// of an uncontended acquire + release (an insert and a remove per hold).
type IdHash = BuildHasherDefault<IdHasher>;

#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, id: u64) {
        // Fibonacci hashing: spreads a counter's values over the high bits
        // the table's control bytes are taken from.
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// See the module docs.
#[derive(Default)]
pub(crate) struct LiveHolds {
    inner: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    closed: bool,
    next: u64,
    /// By id, hashed by [`IdHash`].
    holds: HashMap<u64, Weak<dyn Live>, IdHash>,
    /// The kept holds, and their count at the last sweep of the ended ones.
    kept: HashMap<u64, Arc<dyn Live>, IdHash>,
    swept_at: usize,
}

impl LiveHolds {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a hold: its id, for [`remove`](LiveHolds::remove); `None` once
    /// closed (the caller then ends the hold itself).
    pub(crate) fn add(&self, hold: Weak<dyn Live>) -> Option<u64> {
        let mut registry = self.registry();
        // Under the lock that `close` drains: no hold slips in after it.
        if registry.closed {
            return None;
        }
        registry.next += 1;
        let id = registry.next;
        registry.holds.insert(id, hold);
        Some(id)
    }

    /// The hold `id` ended.
    pub(crate) fn remove(&self, id: u64) {
        let removed = self.registry().holds.remove(&id);
        // Dropped outside the lock.
        drop(removed);
    }

    /// Keeps `hold` until [`let_go`](LiveHolds::let_go); `None` once
    /// closed. Kept holds that ended without being let go (lost, and
    /// nobody released them) are swept each time their count doubles.
    pub(crate) fn keep(&self, hold: Arc<dyn Live>) -> Option<u64> {
        let mut registry = self.registry();
        if registry.closed {
            return None;
        }
        registry.next += 1;
        let id = registry.next;
        registry.kept.insert(id, hold);
        let mut ended = Vec::new();
        if registry.kept.len() >= (registry.swept_at * 2).max(64) {
            registry.kept.retain(|_, h| match h.ended() {
                true => {
                    ended.push(h.clone());
                    false
                }
                false => true,
            });
            registry.swept_at = registry.kept.len();
        }
        drop(registry);
        // Dropped outside the lock: a hold's drop enters this registry.
        drop(ended);
        Some(id)
    }

    /// The kept hold `id` ended: no longer kept.
    pub(crate) fn let_go(&self, id: u64) {
        let removed = self.registry().kept.remove(&id);
        drop(removed);
    }

    /// Closes: refuses every later hold and ends every live one (their
    /// releases go to the background, which the caller then flushes), then
    /// lets go of the kept ones (ended by then: their holds were live).
    pub(crate) fn close(&self) {
        let (live, kept) = {
            let mut registry = self.registry();
            registry.closed = true;
            let live: Vec<Weak<dyn Live>> =
                std::mem::take(&mut registry.holds).into_values().collect();
            let kept: Vec<Arc<dyn Live>> =
                std::mem::take(&mut registry.kept).into_values().collect();
            (live, kept)
        };
        for hold in live.iter().filter_map(Weak::upgrade) {
            hold.close();
        }
        for hold in &kept {
            hold.close();
        }
        drop(kept);
    }
}

/// A client's close: `live` closed, then `flush` (which waits for the
/// releases the close left to the background) within `within`. Whether
/// all finished in time.
pub(crate) async fn close_within<F: Future<Output = bool>>(
    live: &LiveHolds,
    within: std::time::Duration,
    flush: impl FnOnce(std::time::Duration) -> F,
) -> bool {
    live.close();
    flush(within).await
}
