//! One acquire attempt (layer 4, beside `lock` and `wait`): a first try,
//! or a waiter's, which also learns how long the holder has left
//! ([`Busy`]). The lock an attempt may have taken is released if the
//! attempt is dropped or fails before its reply was understood (an
//! [`Armed`] guard of the wait core, `pending`); a lock made [`with_replicas`](Lock::with_replicas)
//! confirms a hold with its replicas before it counts as taken (a barging
//! attempt, a fair one, and a fair wait's hand-off).

use std::time::{Duration, Instant};

use crate::primitives::lock::guard::LockGuard;
use crate::primitives::lock::Lock;
use crate::primitives::wait::armed::Armed;
use crate::vocab::error::Result;
use crate::vocab::outcome::{Attempt, AttemptMode};
use crate::vocab::retry::Retry;

impl Lock {
    /// `try_acquire` without metrics and span.
    pub(crate) async fn try_acquire_once(&self) -> Result<Option<LockGuard>> {
        Ok(self.first_try().await?.ok())
    }

    /// A first try (`try_acquire`'s, and the first step of a wait): the
    /// lock, or why not (as much as a first try learns: whether the holder
    /// keeps the lock while idle).
    pub(crate) async fn first_try(&self) -> Result<Result<LockGuard, Busy>> {
        if self.inner.fair_lease.is_some() {
            return Box::pin(async {
                match self.fair_try_once().await? {
                    Some(guard) => self.confirmed(guard).await.map(Ok),
                    None => Ok(Err(Busy::unknown())),
                }
            })
            .await;
        }
        self.attempt(self.attempt_mode(false, false)).await
    }

    /// Like `try_acquire`, but a busy lock says how long the holder has
    /// left, and whether its release will wake us; `mark`: make sure it
    /// will (see [`AttemptMode::mark`](crate::vocab::outcome::AttemptMode::mark)).
    pub(crate) async fn try_acquire_with_ttl(&self, mark: bool) -> Result<Result<LockGuard, Busy>> {
        self.attempt(self.attempt_mode(true, mark)).await
    }

    /// One attempt in `mode`: the lock, or why not.
    async fn attempt(&self, mode: AttemptMode) -> Result<Result<LockGuard, Busy>> {
        let token = match self.inner.caching {
            true => self.inner.backend.new_caching_token()?,
            false => self.inner.backend.new_token()?,
        };
        let pending = self.pending(&token);
        let attempt = self
            .inner
            .backend
            .try_once(&self.inner.keys, &token, self.inner.lease.ttl, mode)
            .await?;
        let pending = match attempt {
            // Boxed: every attempt's future would carry this large one.
            Attempt::Acquired { valid_until, .. } if self.inner.replicas.is_some() => {
                Box::pin(self.replicated(&token, valid_until, pending)).await?
            }
            _ => pending,
        };
        pending.disarm();
        drop(pending);
        Ok(match attempt {
            Attempt::Acquired {
                fencing_token,
                valid_until,
            } => Ok(LockGuard::new(
                self.inner.clone(),
                token,
                fencing_token,
                valid_until,
            )),
            Attempt::Busy {
                retry_in,
                announced,
                holder,
                kept_idle,
            } => Err(Busy {
                retry_in,
                announced,
                holder,
                kept_idle,
            }),
        })
    }

    /// For a lock made [`with_replicas`](Lock::with_replicas): confirms
    /// the hold just taken with the replicas; when too few acknowledge,
    /// releases it (in the background if that fails) and says so. An error
    /// leaves `pending` to release the lock.
    async fn replicated<F: FnOnce()>(
        &self,
        token: &str,
        valid_until: Instant,
        pending: Armed<F>,
    ) -> Result<Armed<F>> {
        let confirmed = self.inner.confirm_replicas(token, valid_until).await?;
        let Some(acked) = confirmed.shortfall() else {
            return Ok(pending);
        };
        let backend = &self.inner.backend;
        if backend
            .release(&self.inner.keys, token, false)
            .await
            .is_ok()
        {
            pending.disarm();
            self.inner.local.wake();
        }
        Err(self.inner.too_few_replicas(acked))
    }

    /// A hold made by a fair lock's script (taken or handed on), confirmed
    /// with the replicas of a lock made [`with_replicas`](Lock::with_replicas);
    /// one that too few acknowledge is released (handed on) and refused.
    pub(crate) async fn confirmed(&self, guard: LockGuard) -> Result<LockGuard> {
        if self.inner.replicas.is_none() {
            return Ok(guard);
        }
        // An error drops the guard: released in the background.
        let confirmed = self
            .inner
            .confirm_replicas(guard.token(), guard.deadline())
            .await?;
        let Some(acked) = confirmed.shortfall() else {
            return Ok(guard);
        };
        let _ = guard.release().await;
        Err(self.inner.too_few_replicas(acked))
    }

    /// The wait of a fair lock, its hold confirmed with the replicas of a
    /// lock made [`with_replicas`](Lock::with_replicas). A hold too few
    /// acknowledge is handed on, and the waiter queues again, as a barging
    /// waiter retries, by the one failure policy (`vocab/retry.rs`): until
    /// `deadline`, or, without one, until the confirmations have failed
    /// for [`GIVE_UP_AFTER`](crate::vocab::retry::GIVE_UP_AFTER).
    pub(crate) async fn fair_acquire_replicated(
        &self,
        deadline: Option<Instant>,
        started: Instant,
    ) -> Result<LockGuard> {
        let mut retry = Retry::until(deadline);
        let what = self.inner.display_name();
        loop {
            let guard = self.fair_acquire_until(deadline, started).await?;
            match self.confirmed(guard).await {
                // Not confirmed: queue again at once (the hold was handed on).
                Err(e) => drop(retry.failed(e, &what)?),
                other => return other,
            }
        }
    }
}

/// A waiter's attempt found the lock busy.
pub(crate) struct Busy {
    /// The holder's remaining TTL, when known.
    pub(crate) retry_in: Option<Duration>,
    /// Whether the holder's release will publish a wake-up.
    pub(crate) announced: bool,
    /// A fingerprint of the holder, for a lock made `with_asking` (when the
    /// backend names it).
    pub(crate) holder: Option<u64>,
    /// The holder keeps the lock while idle (a first try saw its token).
    pub(crate) kept_idle: bool,
}

impl Busy {
    /// Busy, and nothing more known.
    fn unknown() -> Busy {
        Busy {
            retry_in: None,
            announced: false,
            holder: None,
            kept_idle: false,
        }
    }
}

impl Lock {
    /// Releases, in the background, a lock that an attempt with `token` may
    /// have taken if the attempt is dropped (cancelled) or fails before its
    /// reply was understood. Built from borrows: the clones happen only then.
    fn pending<'a>(&'a self, token: &'a str) -> Armed<impl FnOnce() + 'a> {
        crate::primitives::lease::background::pending(&self.inner, token)
    }
}
