//! What a lock is, shared by the [`Lock`](crate::Lock) recipe and every
//! guard made from it (layer 4): its backend, name, keys, TTL and options.

use std::sync::Arc;
use std::time::Duration;

use crate::backend::Backend;
use crate::metrics::LockLabel;
use crate::names::LockKeys;
use crate::queue::LocalSlot;

/// What a [`Lock`](crate::Lock) is.
#[derive(Clone)]
pub(crate) struct LockSpec {
    pub(crate) backend: Backend,
    pub(crate) name: Arc<[u8]>,
    pub(crate) keys: Arc<LockKeys>,
    pub(crate) ttl: Duration,
    pub(crate) renew_every: Option<Duration>,
    /// Whether every acquisition also issues the fencing token (one script
    /// instead of a bare `SET`): see [`Lock::with_fencing`].
    pub(crate) fenced: bool,
    /// A fair lock's waiter lease (`Lock::fair`); `None`: a barging lock.
    pub(crate) fair_lease: Option<Duration>,
    /// Replicas that must acknowledge an acquisition (`WAIT`), and how long
    /// to wait for them: see [`Lock::with_replicas`](crate::Lock::with_replicas).
    pub(crate) replicas: Option<(usize, std::time::Duration)>,
    /// The `lock` label of this lock's metrics, computed once.
    pub(crate) metrics_label: LockLabel,
    /// This client's queue and guard count for the name, looked up once.
    pub(crate) local: Arc<LocalSlot>,
}

impl LockSpec {
    /// The lock's name, lossily decoded, for messages and log lines.
    pub(crate) fn display_name(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.name)
    }
}
