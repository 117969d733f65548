//! What only some holds have, on the one `Guard` class (reached through
//! `Guard::as_any`): several locks' names, per-lock tokens and which one
//! was lost; a permit's count and a read-write hold's access; a
//! leadership's start and `proclaim`. And `forget`, which every hold has.
//! Asked of a hold of another kind, each answers null (or, for a call that
//! goes to Redis, rejects with UNSUPPORTED).

use latchkey::{
    BoxFuture, Kept, Leadership, MultiGuard, Ownership, PermitGuard, RwAccess, RwGuard,
};
use napi::bindgen_prelude::{BigInt, Buffer};
use napi::Env;
use napi_derive::napi;

use crate::hold::{unless_ended, Guard};
use crate::runtime::promise;
use crate::runtime::Promise;

#[napi]
impl Guard {
    /// Lets go of the hold without releasing it: no more renewals, and the
    /// key stays in Redis until its TTL, for a process given the token
    /// (`latchkey release --token`). The token; null if already released.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn forget(&self, env: Env) -> napi::Result<Promise<Option<String>>> {
        let kept = self.kept.clone();
        promise(&env, async move { Ok(kept.forget().await) })
    }

    /// The names of several locks held at once (lockAll), else null.
    #[napi]
    pub fn names(&self) -> Option<Vec<String>> {
        as_kind(&self.kept, |g: &MultiGuard| {
            g.names()
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .collect()
        })
    }

    /// The fencing token of one lock of a lockAll's (issued as
    /// `fencingToken()` issues one).
    #[napi(ts_return_type = "Promise<bigint>")]
    pub fn fencing_token_of(&self, env: Env, name: String) -> napi::Result<Promise<BigInt>> {
        let kept = self.kept.clone();
        promise(&env, async move {
            let name_of = String::from_utf8_lossy(kept.name()).into_owned();
            let not_held = || Err(latchkey::Error::NotHeld { name: name_of });
            on_kind(
                &kept,
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
        let kept = self.kept.clone();
        promise(&env, async move {
            on_kind(
                &kept,
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
        as_kind(&self.kept, |g: &PermitGuard| g.permits())
            .or_else(|| as_kind(&self.kept, |_: &RwGuard| 1))
    }

    /// `"read"` or `"write"` for a read-write lock's hold, else null.
    #[napi(ts_return_type = "'read' | 'write' | null")]
    pub fn access(&self) -> Option<&'static str> {
        as_kind(&self.kept, |g: &RwGuard| match g.access() {
            RwAccess::Read => "read",
            RwAccess::Write => "write",
        })
    }

    /// When a leadership began, in ms since the epoch (the server's
    /// clock), else null.
    #[napi]
    pub fn since(&self) -> Option<f64> {
        as_kind(&self.kept, |g: &Leadership| {
            g.since()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        })
    }

    /// Changes a leadership's value: whether we still led.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn proclaim(&self, env: Env, value: Buffer) -> napi::Result<Promise<bool>> {
        let kept = self.kept.clone();
        let value = value.to_vec();
        promise(&env, async move {
            on_kind(
                &kept,
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

/// `op` on the hold as the guard kind `G`, if it is one and still held.
fn as_kind<G: 'static, R>(kept: &Kept, op: impl FnOnce(&G) -> R) -> Option<R> {
    kept.with_guard(|g| g.as_any().downcast_ref::<G>().map(op))
        .flatten()
}

/// `op` on the hold as the guard kind `G` (a release waits for it):
/// UNSUPPORTED with `not` when it is another kind, `released()` once it
/// was released or forgotten.
async fn on_kind<G: 'static, R>(
    kept: &Kept,
    not: &'static str,
    released: impl FnOnce() -> latchkey::Result<R>,
    op: impl for<'a> FnOnce(&'a G) -> BoxFuture<'a, latchkey::Result<R>>,
) -> latchkey::Result<R> {
    let found = kept
        .call(|g| match g.as_any().downcast_ref::<G>() {
            Some(g) => op(g),
            None => Box::pin(async move { Err(latchkey::Error::Unsupported(not)) }),
        })
        .await;
    unless_ended(kept, found, released)
}
