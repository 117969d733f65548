//! What can be acquired (a lock, a kept lock, several locks, k permits, a
//! read or write side, a candidacy): one trait over the library's
//! primitives, each answering a `Box<dyn DynGuard>`, and the one
//! JavaScript class over it, `Acquirer` (lib/lock.js and its siblings wrap
//! it).

use std::sync::Arc;
use std::time::Instant;

use latchkey::{BoxFuture, DynGuard, RwAccess};
use napi::Env;
use napi_derive::napi;

use crate::completions::Promise;
use crate::core::Core;
use crate::hold::{Guard, Holding};
use crate::runtime::{cancellable, promise, token, Cancel};

type Taken = latchkey::Result<Box<dyn DynGuard>>;

/// A primitive's acquisitions, in its Rust calls.
pub(crate) trait Acquire: Send + Sync + 'static {
    /// One try: a hold, or None when it is someone else's.
    fn try_take(&self) -> BoxFuture<'_, latchkey::Result<Option<Box<dyn DynGuard>>>>;
    /// Waits until `deadline` (None: as long as it takes).
    fn take(&self, deadline: Option<Instant>) -> BoxFuture<'_, Taken>;
    /// What a hold carries beside the guard (a leadership's value).
    fn value(&self) -> Option<Vec<u8>> {
        None
    }
    /// Gives a kept idle hold back to Redis now (a cached lock's); whether
    /// one was. Nothing is kept by the others.
    fn give_back(&self) -> BoxFuture<'_, latchkey::Result<bool>> {
        Box::pin(async { Ok(false) })
    }
}

fn boxed<G: DynGuard + 'static>(g: latchkey::Result<G>) -> Taken {
    Ok(Box::new(g?))
}

fn boxed_opt<G: DynGuard + 'static>(
    g: latchkey::Result<Option<G>>,
) -> latchkey::Result<Option<Box<dyn DynGuard>>> {
    Ok(g?.map(|g| Box::new(g) as Box<dyn DynGuard>))
}

/// The recipes whose `try_acquire`, `acquire` and `acquire_until` take
/// nothing else: one impl shape, said once (with the kept lock's
/// `give_back` where it has one).
macro_rules! acquire_by_deadline {
    ($recipe:ty $(, give_back: $give_back:path)?) => {
        impl Acquire for $recipe {
            fn try_take(&self) -> BoxFuture<'_, latchkey::Result<Option<Box<dyn DynGuard>>>> {
                Box::pin(async move { boxed_opt(self.try_acquire().await) })
            }
            fn take(&self, deadline: Option<Instant>) -> BoxFuture<'_, Taken> {
                Box::pin(async move {
                    match deadline {
                        Some(at) => boxed(self.acquire_until(at).await),
                        None => boxed(self.acquire().await),
                    }
                })
            }
            $(fn give_back(&self) -> BoxFuture<'_, latchkey::Result<bool>> {
                Box::pin($give_back(self))
            })?
        }
    };
}

acquire_by_deadline!(latchkey::Lock);
acquire_by_deadline!(latchkey::MultiLock);

/// A cached lock, and whether every hold comes with its fencing token
/// (`fencing: true`): the library issues a kept hold's token on its first
/// `fencing_token()` call, so it is asked at the acquisition (one round
/// trip for a hold taken from the kept one, none for one taken from Redis
/// with its token).
pub(crate) struct Cached(pub(crate) latchkey::CachedLock, pub(crate) bool);

impl Cached {
    async fn fenced(&self, guard: latchkey::CachedGuard) -> Taken {
        if self.1 {
            guard.fencing_token().await?;
        }
        Ok(Box::new(guard))
    }
}

impl Acquire for Cached {
    fn try_take(&self) -> BoxFuture<'_, latchkey::Result<Option<Box<dyn DynGuard>>>> {
        Box::pin(async move {
            match self.0.try_acquire().await? {
                Some(guard) => Ok(Some(self.fenced(guard).await?)),
                None => Ok(None),
            }
        })
    }
    fn take(&self, deadline: Option<Instant>) -> BoxFuture<'_, Taken> {
        Box::pin(async move {
            let guard = match deadline {
                Some(at) => self.0.acquire_until(at).await?,
                None => self.0.acquire().await?,
            };
            self.fenced(guard).await
        })
    }
    fn give_back(&self) -> BoxFuture<'_, latchkey::Result<bool>> {
        Box::pin(self.0.give_back())
    }
}

/// `k` permits of a semaphore, all or none.
pub(crate) struct Permits(pub(crate) latchkey::Semaphore, pub(crate) u32);

impl Acquire for Permits {
    fn try_take(&self) -> BoxFuture<'_, latchkey::Result<Option<Box<dyn DynGuard>>>> {
        Box::pin(async move { boxed_opt(self.0.try_acquire_many(self.1).await) })
    }
    fn take(&self, deadline: Option<Instant>) -> BoxFuture<'_, Taken> {
        Box::pin(async move {
            match deadline {
                Some(at) => boxed(self.0.acquire_many_until(self.1, at).await),
                None => boxed(self.0.acquire_many(self.1).await),
            }
        })
    }
}

/// One side of a read-write lock.
pub(crate) struct Side(pub(crate) latchkey::RwLock, pub(crate) RwAccess);

impl Acquire for Side {
    fn try_take(&self) -> BoxFuture<'_, latchkey::Result<Option<Box<dyn DynGuard>>>> {
        Box::pin(async move {
            match self.1 {
                RwAccess::Read => boxed_opt(self.0.try_read().await),
                _ => boxed_opt(self.0.try_write().await),
            }
        })
    }
    fn take(&self, deadline: Option<Instant>) -> BoxFuture<'_, Taken> {
        Box::pin(async move {
            match (deadline, self.1) {
                (Some(at), access) => boxed(self.0.acquire_until(access, at).await),
                (None, RwAccess::Read) => boxed(self.0.read().await),
                (None, _) => boxed(self.0.write().await),
            }
        })
    }
}

/// A candidacy: an election and the value to lead with.
pub(crate) struct Candidacy(pub(crate) latchkey::Election, pub(crate) Vec<u8>);

impl Acquire for Candidacy {
    fn try_take(&self) -> BoxFuture<'_, latchkey::Result<Option<Box<dyn DynGuard>>>> {
        Box::pin(async move { boxed_opt(self.0.try_campaign(&self.1).await) })
    }
    fn take(&self, deadline: Option<Instant>) -> BoxFuture<'_, Taken> {
        Box::pin(async move {
            match deadline {
                Some(at) => boxed(self.0.campaign_until(&self.1, at).await),
                None => boxed(self.0.campaign(&self.1).await),
            }
        })
    }
    fn value(&self) -> Option<Vec<u8>> {
        Some(self.1.clone())
    }
}

/// Something to acquire, on a client (the native half of `Lock`,
/// `Semaphore`'s permits, `RwLock`'s sides, `Election.campaign`).
#[napi]
pub struct Acquirer {
    pub(crate) inner: Arc<dyn Acquire>,
    pub(crate) core: Arc<Core>,
}

#[napi]
impl Acquirer {
    /// A guard, or null when someone else holds it.
    #[napi(ts_return_type = "Promise<Guard | null>")]
    pub fn try_acquire(&self, env: Env) -> napi::Result<Promise<Option<Guard>>> {
        let (inner, core) = (self.inner.clone(), self.core.clone());
        cancellable(&env, None, core.closing(), async move {
            core.check_open()?;
            let value = inner.value();
            match inner.try_take().await? {
                Some(g) => Ok(Some(Guard::new(Holding::new(g, &core, value)?))),
                None => Ok(None),
            }
        })
    }

    /// Gives a cached lock's kept idle hold back to Redis now: whether one
    /// was kept (false for every other lock). A hold in use is given back
    /// at its release.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn give_back(&self, env: Env) -> napi::Result<Promise<bool>> {
        let inner = self.inner.clone();
        promise(&env, async move { inner.give_back().await })
    }

    /// Waits at most `timeout_ms` (null: as long as it takes), or until
    /// `cancel` fires.
    #[napi(ts_return_type = "Promise<Guard>")]
    pub fn acquire(
        &self,
        env: Env,
        timeout_ms: Option<f64>,
        cancel: Option<&Cancel>,
    ) -> napi::Result<Promise<Guard>> {
        let deadline = crate::args::deadline(timeout_ms).map_err(crate::errors::to_js)?;
        let (inner, core) = (self.inner.clone(), self.core.clone());
        cancellable(&env, token(cancel), core.closing(), async move {
            core.check_open()?;
            let value = inner.value();
            let guard = inner.take(deadline).await?;
            Ok(Guard::new(Holding::new(guard, &core, value)?))
        })
    }
}
