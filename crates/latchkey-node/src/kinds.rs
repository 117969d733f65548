//! What only some holds have, on the one `Guard` class (reached through
//! `Guard::as_any`): several locks' names, per-lock tokens and which one
//! was lost; a permit's count and a read-write hold's access; a
//! leadership's start and `proclaim`. And `forget`, which every hold has.
//! Asked of a hold of another kind, each answers null (or, for a call that
//! goes to Redis, rejects with UNSUPPORTED).

use latchkey::{BoxFuture, Leadership, MultiGuard, Ownership, PermitGuard, RwAccess, RwGuard};
use napi::bindgen_prelude::{BigInt, Buffer};
use napi::Env;
use napi_derive::napi;

use crate::hold::{Guard, Holding};
use crate::runtime::promise;
use crate::runtime::Promise;

#[napi]
impl Guard {
    /// Lets go of the hold without releasing it: no more renewals, and the
    /// key stays in Redis until its TTL, for a process given the token
    /// (`latchkey release --token`). The token; null if already released.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn forget(&self, env: Env) -> napi::Result<Promise<Option<String>>> {
        let holding = self.holding.clone();
        promise(&env, async move { Ok(holding.forget().await) })
    }

    /// The names of several locks held at once (lockAll), else null.
    #[napi]
    pub fn names(&self) -> Option<Vec<String>> {
        self.holding.as_kind(|g: &MultiGuard| {
            g.names()
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .collect()
        })
    }

    /// The fencing token of one lock of a lockAll's (issued as
    /// `fencingToken()` issues one).
    #[napi(ts_return_type = "Promise<bigint>")]
    pub fn fencing_token_of(&self, env: Env, name: String) -> napi::Result<Promise<BigInt>> {
        let holding = self.holding.clone();
        promise(&env, async move {
            let not_held = || {
                Err(latchkey::Error::NotHeld {
                    name: holding.name.clone(),
                })
            };
            on_kind(
                &holding,
                "fencingTokenOf: not several locks (lockAll)",
                not_held,
                |g: &MultiGuard| {
                    Box::pin(async move { Ok(BigInt::from(g.fencing_token_of(&name).await?)) })
                },
            )
            .await
        })
    }

    /// Which lock of a lockAll's was lost (a round trip to each), or null
    /// while all are held (and once released: none is ours any more).
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn lost_lock(&self, env: Env) -> napi::Result<Promise<Option<String>>> {
        let holding = self.holding.clone();
        promise(&env, async move {
            on_kind(
                &holding,
                "lostLock: not several locks (lockAll)",
                || Ok(None),
                |g: &MultiGuard| {
                    Box::pin(async move {
                        let lost = g.lost_lock().await?;
                        Ok(lost.map(|n| String::from_utf8_lossy(&n).into_owned()))
                    })
                },
            )
            .await
        })
    }

    /// How many permits a semaphore's hold has (1 for a read or write
    /// hold), else null.
    #[napi]
    pub fn permits(&self) -> Option<u32> {
        self.holding
            .as_kind(|g: &PermitGuard| g.permits())
            .or_else(|| self.holding.as_kind(|_: &RwGuard| 1))
    }

    /// `"read"` or `"write"` for a read-write lock's hold, else null.
    #[napi(ts_return_type = "'read' | 'write' | null")]
    pub fn access(&self) -> Option<&'static str> {
        self.holding.as_kind(|g: &RwGuard| match g.access() {
            RwAccess::Read => "read",
            RwAccess::Write => "write",
        })
    }

    /// When a leadership began, in ms since the epoch (the server's
    /// clock), else null.
    #[napi]
    pub fn since(&self) -> Option<f64> {
        self.holding.as_kind(|g: &Leadership| {
            g.since()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        })
    }

    /// Changes a leadership's value: whether we still led.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn proclaim(&self, env: Env, value: Buffer) -> napi::Result<Promise<bool>> {
        let holding = self.holding.clone();
        let value = value.to_vec();
        promise(&env, async move {
            on_kind(
                &holding,
                "proclaim: not a leadership",
                || Ok(false),
                |g: &Leadership| {
                    Box::pin(async move { Ok(g.proclaim(&value).await? == Ownership::Owned) })
                },
            )
            .await
        })
    }
}

/// `op` on the hold as the guard kind `G` (read-locked for the call):
/// UNSUPPORTED with `not` when it is another kind, `released()` once it
/// was released or forgotten.
async fn on_kind<G: 'static, R>(
    holding: &Holding,
    not: &'static str,
    released: impl FnOnce() -> latchkey::Result<R>,
    op: impl for<'a> FnOnce(&'a G) -> BoxFuture<'a, latchkey::Result<R>>,
) -> latchkey::Result<R> {
    let held = holding.guard.read().await;
    match held.as_ref().map(|g| g.as_any().downcast_ref::<G>()) {
        Some(Some(g)) => op(g).await,
        Some(None) => Err(latchkey::Error::Unsupported(not)),
        None => released(),
    }
}
