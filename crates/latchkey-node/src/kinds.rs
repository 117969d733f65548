//! What only some holds have, on the one `Guard` class (reached through
//! `DynGuard::as_any`): several locks' names, per-lock tokens and which one
//! was lost; a permit's count and a read-write hold's access; a
//! leadership's start and `proclaim`. And `forget`, which every hold has.
//! Asked of a hold of another kind, each answers null (or, for a call that
//! goes to Redis, rejects with UNSUPPORTED).

use latchkey::{Leadership, MultiGuard, Ownership, PermitGuard, RwAccess, RwGuard};
use napi::bindgen_prelude::{BigInt, Buffer};
use napi::Env;
use napi_derive::napi;

use crate::completions::Promise;
use crate::hold::Guard;
use crate::runtime::promise;

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
            let held = holding.guard.read().await;
            let multi = held
                .as_ref()
                .map(|g| g.as_any().downcast_ref::<MultiGuard>());
            match multi {
                Some(Some(g)) => Ok(BigInt::from(g.fencing_token_of(&name).await?)),
                Some(None) => Err(latchkey::Error::Unsupported(
                    "fencingTokenOf: not several locks (lockAll)",
                )),
                None => Err(latchkey::Error::NotHeld {
                    name: holding.name.clone(),
                }),
            }
        })
    }

    /// Which lock of a lockAll's was lost (a round trip to each), or null
    /// while all are held.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn lost_lock(&self, env: Env) -> napi::Result<Promise<Option<String>>> {
        let holding = self.holding.clone();
        promise(&env, async move {
            let held = holding.guard.read().await;
            let multi = held
                .as_ref()
                .map(|g| g.as_any().downcast_ref::<MultiGuard>());
            match multi {
                Some(Some(g)) => Ok(g
                    .lost_lock()
                    .await?
                    .map(|n| String::from_utf8_lossy(&n).into_owned())),
                Some(None) => Err(latchkey::Error::Unsupported(
                    "lostLock: not several locks (lockAll)",
                )),
                // Released: none of them is ours any more.
                None => Ok(None),
            }
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
            let held = holding.guard.read().await;
            let leading = held
                .as_ref()
                .map(|g| g.as_any().downcast_ref::<Leadership>());
            match leading {
                Some(Some(g)) => Ok(g.proclaim(&value).await? == Ownership::Owned),
                Some(None) => Err(latchkey::Error::Unsupported("proclaim: not a leadership")),
                None => Ok(false),
            }
        })
    }
}
