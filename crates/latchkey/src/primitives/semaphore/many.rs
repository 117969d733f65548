//! [`Semaphore::acquire_many`] and its family: `k` permits at once, all or
//! none, held by one guard. The layout of such a hold (k members of the
//! permits set, so that every client counting members counts k) is in
//! `docs/protocol.md`, "Several permits at once".

use std::time::Duration;

use crate::primitives::semaphore::permit::PermitGuard;
use crate::primitives::semaphore::Semaphore;
use crate::primitives::wait::deadline_after;
use crate::vocab::error::{Error, Result};
use crate::vocab::names::check_count;

impl Semaphore {
    /// Tries once to take `k` permits at once, all or none:
    /// `Ok(Some(guard))` holding the `k` if at most N − k were held,
    /// `Ok(None)` (nothing taken) otherwise. One round trip.
    ///
    /// Fails with [`Error::InvalidCount`] unless `k` is 1 to N, and
    /// otherwise as [`Semaphore::try_acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Semaphore::try_acquire`]: permits the request may
    /// have taken are given back in the background, all of them.
    pub async fn try_acquire_many(&self, k: u32) -> Result<Option<PermitGuard>> {
        self.try_take(self.check_take(k)?).await
    }

    /// Waits as long as it takes for `k` permits at once. See
    /// [`Semaphore::acquire_many_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Semaphore::acquire_many_until`].
    pub async fn acquire_many(&self, k: u32) -> Result<PermitGuard> {
        self.acquire_by(self.check_take(k)?, None).await
    }

    /// Waits at most `wait` for `k` permits at once, then fails with
    /// [`Error::WaitTimedOut`]. See [`Semaphore::acquire_many_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Semaphore::acquire_many_until`].
    #[deprecated(
        since = "0.4.0",
        note = "use `acquire_many_until`, which takes a Duration (from now) as well as an Instant"
    )]
    pub async fn acquire_many_timeout(&self, k: u32, wait: Duration) -> Result<PermitGuard> {
        self.acquire_by(self.check_take(k)?, deadline_after(wait))
            .await
    }

    /// Waits until `k` permits at once are ours, all or none, or `deadline`
    /// passes ([`Error::WaitTimedOut`]): one guard holds the `k`
    /// ([`PermitGuard::permits`]); its release, renewals (the watchdog),
    /// fencing token, cap and loss are the whole hold's. Waits as
    /// [`Semaphore::acquire_until`] does, woken by every release (see
    /// [`Semaphore`], "Several permits at once", for what it does not
    /// promise under barging). `k = 1` is [`Semaphore::acquire_until`].
    ///
    /// Fails with [`Error::InvalidCount`] unless `k` is 1 to N (this
    /// caller's N), before anything is sent.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves no permit behind (the `k`
    /// taken by a request whose reply was never read are given back in the
    /// background, together) and gives up the subscription.
    pub async fn acquire_many_until(
        &self,
        k: u32,
        deadline: impl Into<crate::vocab::deadline::Deadline>,
    ) -> Result<PermitGuard> {
        self.acquire_by(self.check_take(k)?, deadline.into().instant())
            .await
    }

    /// `k`, if it is 1 to N.
    pub(crate) fn check_take(&self, k: u32) -> Result<u32> {
        const WHAT: &str = "permits taken at once";
        let taken = check_count(WHAT, u64::from(k))?;
        if taken > self.inner.permits {
            return Err(Error::InvalidCount {
                what: WHAT,
                count: u64::from(k),
                reason: "it must be at most the semaphore's permits (N)",
            });
        }
        Ok(taken)
    }
}
