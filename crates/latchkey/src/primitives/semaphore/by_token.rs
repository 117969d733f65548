//! Releasing and extending a semaphore's hold by its owner token, without
//! the guard: for a hold taken by another process that handed over its
//! token (a stateless door, `latchkey serve` or `latchkey mcp`, whose caller
//! keeps the token between calls).
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! use std::time::Duration;
//! let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
//! let uploads = client.semaphore("uploads", 8, Duration::from_secs(60))?;
//! // Two permits taken at once, by a process that kept only the token.
//! let token = uploads.try_acquire_many(2).await?.map(|permits| permits.forget());
//! if let Some(token) = token {
//!     uploads.extend_token(&token, 2, Duration::from_secs(60)).await?;
//!     uploads.release_token(&token, 2).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! These run the guard's own scripts ([`PermitGuard::release`],
//! [`PermitGuard::extend`]): a wrong or stale token changes nothing and is
//! reported by the outcome. `k` is the number of permits the hold took at
//! once (1, or the `k` of [`Semaphore::acquire_many`]): the hold's members
//! are the token and `k - 1` more named after it, and a smaller `k` would
//! leave the others to their TTL.
//!
//! [`PermitGuard::release`]: crate::PermitGuard
//! [`PermitGuard::extend`]: crate::PermitGuard

use std::time::Duration;

use crate::primitives::semaphore::permit::{extend, release};
use crate::primitives::semaphore::Semaphore;
use crate::vocab::error::Result;
use crate::vocab::names::check_ttl;
use crate::vocab::outcome::Ownership;

impl Semaphore {
    /// Gives back the hold of `token` (its `k` permits) if it is still
    /// held, and wakes the waiters. One round trip.
    ///
    /// Fails with [`Error::InvalidCount`](crate::Error::InvalidCount) unless
    /// `k` is 1 to N.
    ///
    /// # Cancel safety
    /// Not finished for you: dropped after the request was sent, the hold
    /// may or may not be given back (no guard owns this token, so nothing
    /// releases it in the background). Call it again: a second release is
    /// harmless (`Expired`).
    pub async fn release_token(&self, token: &str, k: u32) -> Result<Ownership> {
        release(&self.inner, token, self.check_take(k)?).await
    }

    /// Resets the TTL of the hold of `token` (its `k` permits) to `ttl` from
    /// now if it is still held. One round trip. Fails with
    /// [`Error::InvalidTtl`](crate::Error::InvalidTtl) for a TTL outside
    /// [`MIN_TTL`](crate::limits::MIN_TTL)..=[`MAX_TTL`](crate::limits::MAX_TTL),
    /// and with [`Error::InvalidCount`](crate::Error::InvalidCount) unless
    /// `k` is 1 to N.
    ///
    /// # Cancel safety
    /// Dropped after the request was sent, the TTL may or may not have been
    /// reset; calling it again is harmless.
    pub async fn extend_token(&self, token: &str, k: u32, ttl: Duration) -> Result<Ownership> {
        check_ttl(ttl)?;
        let (outcome, _valid_until) =
            extend(&self.inner, token, self.check_take(k)?, ttl, None).await?;
        Ok(outcome)
    }
}
