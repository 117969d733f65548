//! One acquire attempt (layer 4, beside `lock` and `wait`): a first try,
//! or a waiter's, which also learns how long the holder has left
//! ([`Busy`]). The lock an attempt may have taken is released if the
//! attempt is dropped or fails before its reply was understood
//! ([`PendingAttempt`]); a lock made [`with_replicas`](Lock::with_replicas)
//! waits for its replicas before it counts as taken.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::lock::Lock;
use crate::outcome::{Attempt, AttemptMode};

impl Lock {
    /// `try_acquire` without metrics and span: also the first step of a wait.
    pub(crate) async fn try_acquire_once(&self) -> Result<Option<LockGuard>> {
        if self.inner.fair_lease.is_some() {
            return Box::pin(self.fair_try_once()).await;
        }
        Ok(self.attempt(self.attempt_mode(false, false)).await?.ok())
    }

    /// Like `try_acquire`, but a busy lock says how long the holder has
    /// left, and whether its release will wake us; `mark`: make sure it
    /// will (see [`AttemptMode::mark`](crate::outcome::AttemptMode::mark)).
    pub(crate) async fn try_acquire_with_ttl(&self, mark: bool) -> Result<Result<LockGuard, Busy>> {
        self.attempt(self.attempt_mode(true, mark)).await
    }

    /// One attempt in `mode`: the lock, or why not.
    async fn attempt(&self, mode: AttemptMode) -> Result<Result<LockGuard, Busy>> {
        let token = self.inner.backend.new_token()?;
        let pending = PendingAttempt {
            lock: self,
            token: Some(&token),
        };
        let attempt = self
            .inner
            .backend
            .try_once(&self.inner.keys, &token, self.inner.ttl, mode)
            .await?;
        let pending = match attempt {
            Attempt::Acquired { .. } => self.replicated(&token, pending).await?,
            Attempt::Busy { .. } => pending,
        };
        pending.disarm();
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
            } => Err(Busy {
                retry_in,
                announced,
            }),
        })
    }

    /// For a lock made [`with_replicas`](Lock::with_replicas): waits for
    /// the replicas; when too few acknowledge, releases the lock just taken
    /// (in the background if that fails) and says so. An error leaves
    /// `pending` to release the lock.
    async fn replicated<'a>(
        &'a self,
        token: &str,
        pending: PendingAttempt<'a>,
    ) -> Result<PendingAttempt<'a>> {
        match self.inner.replicas {
            // Boxed: every attempt's future would carry this large one.
            Some((wanted, timeout)) => {
                Box::pin(self.wait_for_replicas(token, pending, wanted, timeout)).await
            }
            None => Ok(pending),
        }
    }

    async fn wait_for_replicas<'a>(
        &'a self,
        token: &str,
        pending: PendingAttempt<'a>,
        wanted: usize,
        timeout: Duration,
    ) -> Result<PendingAttempt<'a>> {
        let backend = &self.inner.backend;
        let acked = backend
            .wait_replicas(&self.inner.keys, wanted, timeout)
            .await?;
        if acked >= wanted {
            return Ok(pending);
        }
        if backend
            .release(&self.inner.keys, token, false)
            .await
            .is_ok()
        {
            pending.disarm();
            self.inner.local.wake();
        }
        Err(Error::TooFewReplicas {
            name: self.inner.display_name().into_owned(),
            wanted,
            acked,
            waited: timeout,
        })
    }
}

/// A waiter's attempt found the lock busy.
pub(crate) struct Busy {
    /// The holder's remaining TTL, when known.
    pub(crate) retry_in: Option<Duration>,
    /// Whether the holder's release will publish a wake-up.
    pub(crate) announced: bool,
}

/// Releases, in the background, a lock that an attempt may have taken if the
/// attempt is dropped (cancelled) or fails before its reply was understood.
struct PendingAttempt<'a> {
    lock: &'a Lock,
    token: Option<&'a str>,
}

impl PendingAttempt<'_> {
    fn disarm(mut self) {
        self.token = None;
    }
}

impl Drop for PendingAttempt<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token {
            crate::handoff::release_in_background(
                self.lock.inner.backend.clone(),
                self.lock.inner.keys.clone(),
                self.lock.inner.local.clone(),
                token.to_owned(),
                "an acquire attempt was cancelled or failed after its request was sent",
                None,
            );
        }
    }
}
