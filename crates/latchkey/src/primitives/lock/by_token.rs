//! Releasing and extending a lock by its owner token, without the guard:
//! for a lock acquired by another process that handed over its token (a shell
//! script calling `latchkey acquire`, later `latchkey release`).
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! use std::time::Duration;
//! let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
//! let lock = client.lock("nightly-report", Duration::from_secs(30))?;
//! let token = std::env::var("REPORT_TOKEN").unwrap_or_default();
//!
//! if lock.extend_token(&token, Duration::from_secs(60)).await? != latchkey::Ownership::Owned {
//!     eprintln!("not ours any more");
//! }
//! lock.release_token(&token).await?;
//! # Ok(()) }
//! ```
//!
//! These are the same owner-only compare-and-delete / compare-and-pexpire as
//! [`LockGuard::release`](crate::LockGuard::release) and
//! [`LockGuard::extend`](crate::LockGuard::extend): a wrong or stale token
//! changes nothing and is reported by the outcome.

use std::time::Duration;

use crate::primitives::lock::Lock;
use crate::vocab::error::Result;
use crate::vocab::names::check_ttl;
use crate::vocab::outcome::Ownership;

impl Lock {
    /// Releases the lock if `token` still owns it, and wakes its waiters.
    /// One round trip.
    ///
    /// # Cancel safety
    /// Not finished for you: dropped after the request was sent, the lock
    /// may or may not be released (no guard owns this token, so nothing
    /// releases it in the background). Call it again: a second release of
    /// a released lock is harmless (`Expired`).
    pub async fn release_token(&self, token: &str) -> Result<Ownership> {
        crate::primitives::lock::release::release(
            &self.inner.backend,
            &self.inner.keys,
            &self.inner.local,
            token,
            false,
        )
        .await
    }

    /// Resets the lock's TTL to `ttl` from now if `token` still owns it.
    /// One round trip. Fails with [`Error::InvalidTtl`](crate::Error::InvalidTtl)
    /// for a TTL outside [`MIN_TTL`](crate::limits::MIN_TTL)..=[`MAX_TTL`](crate::limits::MAX_TTL).
    ///
    /// # Cancel safety
    /// Dropped after the request was sent, the TTL may or may not have been
    /// reset; calling it again is harmless.
    pub async fn extend_token(&self, token: &str, ttl: Duration) -> Result<Ownership> {
        check_ttl(ttl)?;
        let (outcome, _valid_until) = self
            .inner
            .backend
            .extend(&self.inner.keys, token, ttl, None)
            .await?;
        Ok(outcome)
    }
}
