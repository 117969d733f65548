//! [`Acquire`]: what can be tried or waited for, as one trait object: a
//! [`Lock`], a [`CachedLock`], a [`MultiLock`], a [`Semaphore`] (one
//! permit, or k with [`Semaphore::taking`]), a side of a [`RwLock`]
//! ([`RwLock::side`]), an election's candidacy ([`Election::candidacy`]).
//! A supervisor, a binding or a test that holds "something" is written
//! once over `Box<dyn Acquire>`, and gets a `Box<dyn Guard>`.

use std::sync::Arc;

use crate::primitives::election::Election;
use crate::primitives::guard::{BoxFuture, Guard};
use crate::primitives::lock::cached::CachedLock;
use crate::primitives::lock::Lock;
use crate::primitives::multi::MultiLock;
use crate::primitives::rwlock::guard::RwAccess;
use crate::primitives::rwlock::RwLock;
use crate::primitives::semaphore::Semaphore;
use crate::vocab::deadline::Deadline;
use crate::vocab::error::Result;

/// Something to hold: one try, or a wait until an instant (or for as long
/// as it takes), each giving its hold as a [`Guard`].
///
/// ```no_run
/// # async fn demo(client: latchkey::Client, permits: Option<u32>) -> latchkey::Result<()> {
/// use std::time::Duration;
/// use latchkey::Acquire;
/// let ttl = Duration::from_secs(10);
/// let what: Box<dyn Acquire> = match permits {
///     Some(k) => Box::new(client.semaphore("jobs", 8, ttl)?.taking(k)),
///     None => Box::new(client.lock("jobs", ttl)?),
/// };
/// let hold = what.take_until(Duration::from_secs(5).into()).await?;
/// hold.release().await?;
/// # Ok(()) }
/// ```
///
/// Sealed, as [`Guard`]: latchkey's primitives are the ones.
pub trait Acquire: sealed::Sealed + Send + Sync {
    /// One attempt: the hold, or `None` when it is someone else's (the
    /// primitive's `try_acquire`).
    ///
    /// # Cancel safety
    /// As the primitive's `try_acquire`: a hold taken by a dropped attempt
    /// is released in the background.
    fn try_take(&self) -> BoxFuture<'_, Result<Option<Box<dyn Guard>>>>;

    /// Waits until `deadline` ([`Deadline::NEVER`]: as long as it takes),
    /// failing with [`Error::WaitTimedOut`](crate::Error::WaitTimedOut)
    /// then: the primitive's `acquire_until`.
    ///
    /// # Cancel safety
    /// As the primitive's `acquire_until`: a dropped wait leaves no hold and
    /// no place in a queue.
    fn take_until(&self, deadline: Deadline) -> BoxFuture<'_, Result<Box<dyn Guard>>>;

    /// Gives a hold this process keeps while idle back to Redis now (a
    /// [`CachedLock`]'s): whether one was kept. Nothing else keeps one.
    ///
    /// # Cancel safety
    /// As [`CachedLock::give_back`].
    fn give_back(&self) -> BoxFuture<'_, Result<bool>> {
        Box::pin(async { Ok(false) })
    }
}

/// A shared one (a binding's recipe, kept by several objects).
impl<A: Acquire + ?Sized> sealed::Sealed for Arc<A> {}

impl<A: Acquire + ?Sized> Acquire for Arc<A> {
    fn try_take(&self) -> BoxFuture<'_, Result<Option<Box<dyn Guard>>>> {
        (**self).try_take()
    }
    fn take_until(&self, deadline: Deadline) -> BoxFuture<'_, Result<Box<dyn Guard>>> {
        (**self).take_until(deadline)
    }
    fn give_back(&self) -> BoxFuture<'_, Result<bool>> {
        (**self).give_back()
    }
}

fn boxed<G: Guard + 'static>(taken: Result<G>) -> Result<Box<dyn Guard>> {
    Ok(Box::new(taken?))
}

fn boxed_some<G: Guard + 'static>(taken: Result<Option<G>>) -> Result<Option<Box<dyn Guard>>> {
    Ok(taken?.map(|g| Box::new(g) as Box<dyn Guard>))
}

/// The primitives whose `try_acquire`, `acquire` and `acquire_until` take
/// nothing else.
macro_rules! acquire_by_deadline {
    ($($recipe:ty),*) => {$(
        impl sealed::Sealed for $recipe {}

        impl Acquire for $recipe {
            fn try_take(&self) -> BoxFuture<'_, Result<Option<Box<dyn Guard>>>> {
                Box::pin(async move { boxed_some(self.try_acquire().await) })
            }
            fn take_until(&self, deadline: Deadline) -> BoxFuture<'_, Result<Box<dyn Guard>>> {
                Box::pin(async move { boxed(self.acquire_until(deadline).await) })
            }
        }
    )*};
}

acquire_by_deadline!(Lock, MultiLock, Semaphore);

impl sealed::Sealed for CachedLock {}

impl Acquire for CachedLock {
    fn try_take(&self) -> BoxFuture<'_, Result<Option<Box<dyn Guard>>>> {
        Box::pin(async move { boxed_some(self.try_acquire().await) })
    }
    fn take_until(&self, deadline: Deadline) -> BoxFuture<'_, Result<Box<dyn Guard>>> {
        Box::pin(async move { boxed(self.acquire_until(deadline).await) })
    }
    fn give_back(&self) -> BoxFuture<'_, Result<bool>> {
        Box::pin(CachedLock::give_back(self))
    }
}

/// `k` permits of a [`Semaphore`], taken all at once or not at all: made by
/// [`Semaphore::taking`].
#[derive(Clone, Debug)]
pub struct Permits {
    semaphore: Semaphore,
    k: u32,
}

impl Semaphore {
    /// `k` permits of this semaphore as one [`Acquire`] (its
    /// `try_acquire_many`, `acquire_many_until`, `acquire_many`).
    pub fn taking(&self, k: u32) -> Permits {
        Permits {
            semaphore: self.clone(),
            k,
        }
    }
}

impl sealed::Sealed for Permits {}

impl Acquire for Permits {
    fn try_take(&self) -> BoxFuture<'_, Result<Option<Box<dyn Guard>>>> {
        Box::pin(async move { boxed_some(self.semaphore.try_acquire_many(self.k).await) })
    }
    fn take_until(&self, deadline: Deadline) -> BoxFuture<'_, Result<Box<dyn Guard>>> {
        Box::pin(async move { boxed(self.semaphore.acquire_many_until(self.k, deadline).await) })
    }
}

/// One side of a [`RwLock`]: made by [`RwLock::side`].
#[derive(Clone, Debug)]
pub struct RwSide {
    rw: RwLock,
    access: RwAccess,
}

impl RwLock {
    /// The read or the write side of this lock as one [`Acquire`].
    pub fn side(&self, access: RwAccess) -> RwSide {
        RwSide {
            rw: self.clone(),
            access,
        }
    }
}

impl sealed::Sealed for RwSide {}

impl Acquire for RwSide {
    fn try_take(&self) -> BoxFuture<'_, Result<Option<Box<dyn Guard>>>> {
        Box::pin(async move {
            match self.access {
                RwAccess::Read => boxed_some(self.rw.try_read().await),
                RwAccess::Write => boxed_some(self.rw.try_write().await),
            }
        })
    }
    fn take_until(&self, deadline: Deadline) -> BoxFuture<'_, Result<Box<dyn Guard>>> {
        Box::pin(async move { boxed(self.rw.acquire_until(self.access, deadline).await) })
    }
}

/// A candidacy in an [`Election`], with the value to lead with: made by
/// [`Election::candidacy`]. Its hold is a [`Leadership`](crate::Leadership).
#[derive(Clone, Debug)]
pub struct Candidacy {
    election: Election,
    value: Arc<[u8]>,
}

impl Election {
    /// Campaigning with `value` as one [`Acquire`] (`try_campaign`,
    /// `campaign_until`, `campaign`).
    pub fn candidacy(&self, value: impl AsRef<[u8]>) -> Candidacy {
        Candidacy {
            election: self.clone(),
            value: value.as_ref().into(),
        }
    }
}

impl sealed::Sealed for Candidacy {}

impl Acquire for Candidacy {
    fn try_take(&self) -> BoxFuture<'_, Result<Option<Box<dyn Guard>>>> {
        Box::pin(async move { boxed_some(self.election.try_campaign(&self.value).await) })
    }
    fn take_until(&self, deadline: Deadline) -> BoxFuture<'_, Result<Box<dyn Guard>>> {
        Box::pin(async move { boxed(self.election.campaign_until(&self.value, deadline).await) })
    }
}

mod sealed {
    /// Only latchkey's primitives are [`Acquire`](super::Acquire).
    pub trait Sealed {}
}
