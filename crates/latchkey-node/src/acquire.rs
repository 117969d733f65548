//! What can be acquired (a lock, a kept lock, several locks, k permits, a
//! read or write side, a candidacy): the library's `latchkey::Acquire`,
//! each answering a `Box<dyn latchkey::Guard>` that its client then keeps
//! (`Client::keep`), under one JavaScript class, `Acquirer` (lib/primitives.js's
//! `Lock` and its siblings wrap it).

use std::sync::Arc;

use napi::Env;
use napi_derive::napi;

use crate::core::Core;
use crate::hold::Guard;
use crate::runtime::Promise;
use crate::runtime::{cancellable, promise, token, Cancel};

/// Something to acquire, on a client (the native half of `Lock`,
/// `Semaphore`'s permits, `RwLock`'s sides, `Election.campaign`).
#[napi]
pub struct Acquirer {
    pub(crate) inner: Arc<dyn latchkey::Acquire>,
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
            match inner.try_take().await? {
                Some(g) => Ok(Some(Guard::keep(g, &core)?)),
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
            let guard = inner.take_until(deadline.into()).await?;
            Guard::keep(guard, &core)
        })
    }
}
