//! Releasing and extending a read-write lock's hold by its owner token,
//! without the guard: for a hold taken by another process that handed over
//! its token (a stateless door, `latchkey serve` or `latchkey mcp`, whose
//! caller keeps the token between calls).
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! use std::time::Duration;
//! use latchkey::RwAccess;
//! let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
//! let catalog = client.rwlock("catalog", Duration::from_secs(60))?;
//! if let Some(writing) = catalog.try_write().await? {
//!     let token = writing.forget();
//!     catalog.extend_token(&token, RwAccess::Write, Duration::from_secs(60)).await?;
//!     catalog.release_token(&token, RwAccess::Write).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! These run the guard's own scripts: a wrong or stale token changes
//! nothing and is reported by the outcome. The access is the side the hold
//! was taken on (a reader's token is a member of the readers' set, the
//! writer's the writer key's value).

use std::time::Duration;

use crate::primitives::rwlock::guard::{extend, release, RwAccess};
use crate::primitives::rwlock::RwLock;
use crate::vocab::error::Result;
use crate::vocab::names::check_ttl;
use crate::vocab::outcome::Ownership;

impl RwLock {
    /// Releases the hold of `token` on the side `access` if it is still
    /// held, and wakes the waiters. One round trip. A writer's release lets
    /// in the readers waiting then, who have this handle's TTL to come in
    /// (as a guard's release gives them its lock's).
    ///
    /// # Cancel safety
    /// Not finished for you: dropped after the request was sent, the hold
    /// may or may not be released (no guard owns this token, so nothing
    /// releases it in the background). Call it again: a second release is
    /// harmless (`Expired`).
    pub async fn release_token(&self, token: &str, access: RwAccess) -> Result<Ownership> {
        release(&self.inner, access, token).await
    }

    /// Resets the TTL of the hold of `token` on the side `access` to `ttl`
    /// from now if it is still held. One round trip. Fails with
    /// [`Error::InvalidTtl`](crate::Error::InvalidTtl) for a TTL outside
    /// [`MIN_TTL`](crate::limits::MIN_TTL)..=[`MAX_TTL`](crate::limits::MAX_TTL).
    ///
    /// # Cancel safety
    /// Dropped after the request was sent, the TTL may or may not have been
    /// reset; calling it again is harmless.
    pub async fn extend_token(
        &self,
        token: &str,
        access: RwAccess,
        ttl: Duration,
    ) -> Result<Ownership> {
        check_ttl(ttl)?;
        let (outcome, _valid_until) = extend(&self.inner, access, token, ttl, None).await?;
        Ok(outcome)
    }
}
