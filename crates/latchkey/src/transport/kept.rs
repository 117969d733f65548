//! Holds a client keeps while idle (`Lock::with_caching`, layer 4),
//! registered here so that [`Client::flush`](crate::Client::flush) gives
//! them back to Redis first. The transport knows only this trait: the
//! primitive implements it.

use std::sync::{Mutex, Weak};

/// Something that keeps a hold while idle and can give it back.
pub(crate) trait GiveBack: Send + Sync {
    /// Starts giving the kept hold back (a task on `tracker`, which
    /// `flush` waits for); a hold in use is given back at its release.
    fn give_back(&self, tracker: &tokio_util::task::TaskTracker);
}

/// The registry of one client's kept holds (weak: a lock that is dropped
/// leaves by itself).
#[derive(Default)]
pub(crate) struct Kept(Mutex<Vec<Weak<dyn GiveBack>>>);

impl Kept {
    pub(crate) fn register(&self, kept: Weak<dyn GiveBack>) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|k| k.strong_count() > 0);
        all.push(kept);
    }

    /// Asks every live one to give its hold back.
    pub(crate) fn give_back_all(&self, tracker: &tokio_util::task::TaskTracker) {
        let alive: Vec<_> = {
            let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
            all.retain(|k| k.strong_count() > 0);
            all.iter().filter_map(Weak::upgrade).collect()
        };
        for kept in alive {
            kept.give_back(tracker);
        }
    }
}
