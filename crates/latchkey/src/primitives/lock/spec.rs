//! What a lock is, shared by the [`Lock`](crate::Lock) recipe and every
//! guard made from it (layer 4): its backend, name, keys, TTL and options.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::primitives::lease::options::LeaseOptions;
use crate::transport::local_queues::LocalSlot;
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::LockKeys;
use crate::vocab::outcome::Ownership;

/// What a [`Lock`](crate::Lock) is.
#[derive(Clone)]
pub struct LockSpec {
    pub(crate) backend: Backend,
    pub(crate) name: Arc<[u8]>,
    pub(crate) keys: Arc<LockKeys>,
    /// TTL, watchdog, cap, stop margin; `fenced`: every acquisition also
    /// issues the fencing token (one script instead of a bare `SET`: see
    /// [`Lock::with_fencing`]); `asking`: a waiter asks the holder to let go
    /// (see [`Lock::with_asking`](crate::Lock::with_asking)).
    pub(crate) lease: LeaseOptions,
    /// A fair lock's waiter lease (`Lock::fair`); `None`: a barging lock.
    pub(crate) fair_lease: Option<Duration>,
    /// Replicas that must acknowledge an acquisition (`WAIT`), and how long
    /// to wait for them: see [`Lock::with_replicas`](crate::Lock::with_replicas).
    pub(crate) replicas: Option<(usize, std::time::Duration)>,
    /// Whether its holds are kept while idle ([`Lock::with_caching`](crate::Lock::with_caching)):
    /// their tokens carry the caching mark, which waiters answer with `wanted`.
    pub(crate) caching: bool,
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

/// What the replicas said of a hold.
#[derive(Debug)]
pub(crate) enum Replicated {
    /// Enough acknowledged it.
    Enough,
    /// This many did, too few.
    TooFew(usize),
    /// The server that answered does not have it (expired, or another
    /// holder's): a failover to a replica that never saw it, or a lock
    /// that expired in between.
    Gone(Ownership),
}

impl Replicated {
    /// How many acknowledged a hold that is not confirmed (none when it is
    /// gone); `None` when it is.
    pub(crate) fn shortfall(&self) -> Option<usize> {
        match self {
            Replicated::Enough => None,
            Replicated::TooFew(acked) => Some(*acked),
            Replicated::Gone(_) => Some(0),
        }
    }
}

impl LockSpec {
    /// Confirms the hold of `token`, valid until `valid_until`, with the
    /// replicas this lock asks for (`Replicated::Enough` for a lock that
    /// asks for none): a write of ours that keeps the lock's expiry where
    /// the hold put it (its deadline plus the drift allowance) and `WAIT`,
    /// on one connection (see `Session::confirm_replicas` for why).
    pub(crate) async fn confirm_replicas(
        &self,
        token: &str,
        valid_until: Instant,
    ) -> Result<Replicated> {
        let Some((wanted, timeout)) = self.replicas else {
            return Ok(Replicated::Enough);
        };
        let keep = valid_until.saturating_duration_since(Instant::now())
            + crate::vocab::protocol::drift(self.lease.ttl);
        let (ownership, acked) = self
            .backend
            .confirm_replicas(&self.keys, token, keep, wanted, timeout)
            .await?;
        Ok(match ownership {
            Ownership::Owned if acked >= wanted => Replicated::Enough,
            Ownership::Owned => Replicated::TooFew(acked),
            gone => Replicated::Gone(gone),
        })
    }

    /// The error of a hold that `acked` replicas acknowledged, too few.
    pub(crate) fn too_few_replicas(&self, acked: usize) -> Error {
        let (wanted, waited) = self.replicas.unwrap_or_default();
        Error::TooFewReplicas {
            name: self.display_name().into_owned(),
            wanted,
            acked,
            waited,
        }
    }
}
