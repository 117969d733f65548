//! The native halves of the primitives that are not simply acquired: a
//! semaphore's permits and holders, a read-write lock's sides, a latch, a
//! barrier, an election's leader and observer, a fenced resource.

use std::sync::Arc;

use latchkey::RwAccess;
use napi::bindgen_prelude::{BigInt, Buffer};
use napi::Env;
use napi_derive::napi;

use crate::acquire::Acquirer;
use crate::core::Core;
use crate::errors::{invalid, to_js};
use crate::runtime::Promise;
use crate::runtime::{cancellable, promise, token, Cancel};

#[napi]
pub struct Semaphore {
    pub(crate) inner: latchkey::Semaphore,
    pub(crate) core: Arc<Core>,
}

/// Who holds a permit.
#[napi(object)]
pub struct PermitHolderInfo {
    pub token: String,
    pub host: Option<String>,
    pub pid: Option<u32>,
    /// Milliseconds since the epoch.
    pub acquired_at: Option<f64>,
    pub ttl_left_ms: f64,
}

#[napi]
impl Semaphore {
    #[napi(getter)]
    pub fn permits(&self) -> u32 {
        self.inner.permits()
    }

    /// `k` permits at once, all or none.
    #[napi]
    pub fn acquirer(&self, k: f64) -> napi::Result<Acquirer> {
        let k = crate::args::count("permits", k).map_err(to_js)?;
        if k > u64::from(self.inner.permits()) {
            return Err(to_js(invalid(format!(
                "{k} permits asked of a semaphore of {}",
                self.inner.permits()
            ))));
        }
        Ok(Acquirer {
            inner: Arc::new(self.inner.taking(k as u32)),
            core: self.core.clone(),
        })
    }

    #[napi(ts_return_type = "Promise<PermitHolderInfo[]>")]
    pub fn holders(&self, env: Env) -> napi::Result<Promise<Vec<PermitHolderInfo>>> {
        let semaphore = self.inner.clone();
        promise(&env, async move {
            Ok(semaphore
                .holders()
                .await?
                .into_iter()
                .map(|h| PermitHolderInfo {
                    token: h.token,
                    host: h.holder.as_ref().map(|h| h.host.clone()),
                    pid: h.holder.as_ref().map(|h| h.pid),
                    acquired_at: h.holder.as_ref().map(|h| {
                        h.acquired_at
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap_or_default()
                            .as_secs_f64()
                            * 1000.0
                    }),
                    ttl_left_ms: h.ttl.unwrap_or_default().as_secs_f64() * 1000.0,
                })
                .collect())
        })
    }
}

#[napi]
pub struct RwLock {
    pub(crate) inner: latchkey::RwLock,
    pub(crate) core: Arc<Core>,
}

#[napi]
impl RwLock {
    #[napi]
    pub fn reader(&self) -> Acquirer {
        self.side(RwAccess::Read)
    }

    #[napi]
    pub fn writer(&self) -> Acquirer {
        self.side(RwAccess::Write)
    }
}

impl RwLock {
    fn side(&self, access: RwAccess) -> Acquirer {
        Acquirer {
            inner: Arc::new(self.inner.side(access)),
            core: self.core.clone(),
        }
    }
}

#[napi]
pub struct Latch {
    pub(crate) inner: latchkey::Latch,
    pub(crate) core: Arc<Core>,
}

#[napi]
impl Latch {
    /// Creates it with `count`: false when it existed already.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn create(&self, env: Env, count: f64) -> napi::Result<Promise<bool>> {
        let count = crate::args::count("count", count).map_err(to_js)?;
        let latch = self.inner.clone();
        promise(&env, async move { latch.create(count).await })
    }

    /// Counts down by one: what is left.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn count_down(&self, env: Env) -> napi::Result<Promise<f64>> {
        let latch = self.inner.clone();
        promise(&env, async move { Ok(latch.count_down().await? as f64) })
    }

    /// What is left, or null when there is no such latch.
    #[napi(ts_return_type = "Promise<number | null>")]
    pub fn count(&self, env: Env) -> napi::Result<Promise<Option<f64>>> {
        let latch = self.inner.clone();
        promise(
            &env,
            async move { Ok(latch.count().await?.map(|c| c as f64)) },
        )
    }

    /// Waits until it opens.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn wait(
        &self,
        env: Env,
        timeout_ms: Option<f64>,
        cancel: Option<&Cancel>,
    ) -> napi::Result<Promise<()>> {
        let deadline = crate::args::deadline(timeout_ms).map_err(to_js)?;
        let latch = self.inner.clone();
        cancellable(&env, token(cancel), self.core.closing(), async move {
            match deadline {
                Some(at) => latch.wait_until(at).await,
                None => latch.wait().await,
            }
        })
    }
}

#[napi]
pub struct Barrier {
    pub(crate) inner: latchkey::Barrier,
    pub(crate) core: Arc<Core>,
}

#[napi]
impl Barrier {
    #[napi(getter)]
    pub fn parties(&self) -> u32 {
        self.inner.parties()
    }

    /// The current generation and how many of its parties arrived, or
    /// null when the barrier does not exist (never used, or gone at its
    /// TTL).
    #[napi(ts_return_type = "Promise<[generation: bigint, arrived: number] | null>")]
    pub fn state(&self, env: Env) -> napi::Result<Promise<Option<(BigInt, u32)>>> {
        let barrier = self.inner.clone();
        promise(&env, async move {
            Ok(barrier
                .state()
                .await?
                .map(|(generation, arrived)| (BigInt::from(generation), arrived as u32)))
        })
    }

    /// Arrives and waits for the others: the generation met.
    #[napi(ts_return_type = "Promise<bigint>")]
    pub fn wait(
        &self,
        env: Env,
        timeout_ms: Option<f64>,
        cancel: Option<&Cancel>,
    ) -> napi::Result<Promise<BigInt>> {
        let deadline = crate::args::deadline(timeout_ms).map_err(to_js)?;
        let barrier = self.inner.clone();
        cancellable(&env, token(cancel), self.core.closing(), async move {
            let generation = match deadline {
                Some(at) => barrier.arrive_and_wait_until(at).await?,
                None => barrier.arrive_and_wait().await?,
            };
            Ok(BigInt::from(generation))
        })
    }
}

#[napi]
pub struct Election {
    pub(crate) inner: latchkey::Election,
    pub(crate) core: Arc<Core>,
}

#[napi]
impl Election {
    #[napi]
    pub fn candidate(&self, value: Buffer) -> Acquirer {
        Acquirer {
            inner: Arc::new(self.inner.candidacy(&value[..])),
            core: self.core.clone(),
        }
    }

    /// The leader now, or null.
    #[napi(ts_return_type = "Promise<LeaderInfo | null>")]
    pub fn leader(&self, env: Env) -> napi::Result<Promise<Option<crate::signals::LeaderInfo>>> {
        let election = self.inner.clone();
        promise(&env, async move {
            Ok(election
                .leader()
                .await?
                .map(crate::signals::LeaderInfo::from))
        })
    }

    #[napi(ts_return_type = "Promise<Observer>")]
    pub fn observe(&self, env: Env) -> napi::Result<Promise<crate::signals::Observer>> {
        let (election, closing) = (self.inner.clone(), self.core.closing());
        promise(&env, async move {
            Ok(crate::signals::Observer::new(
                election.observe().await?,
                closing,
            ))
        })
    }
}

/// A fenced write's outcome.
#[napi(object)]
pub struct FencedOutcome {
    pub accepted: bool,
    /// The highest token seen, when refused.
    pub seen: Option<BigInt>,
}

#[napi]
pub struct Fenced {
    pub(crate) inner: Arc<latchkey::FencedResource>,
}

fn token_u64(token: BigInt) -> latchkey::Result<u64> {
    let (signed, value, lossless) = token.get_u64();
    if signed || !lossless {
        return Err(invalid("a fencing token is a bigint from 0 to 2^64-1"));
    }
    Ok(value)
}

#[napi]
impl Fenced {
    /// Stores `value` unless a higher token was seen.
    #[napi(ts_return_type = "Promise<FencedOutcome>")]
    pub fn write(
        &self,
        env: Env,
        token: BigInt,
        value: Buffer,
    ) -> napi::Result<Promise<FencedOutcome>> {
        let token = token_u64(token).map_err(to_js)?;
        let (fenced, value) = (self.inner.clone(), value.to_vec());
        promise(&env, async move {
            Ok(match fenced.write(token, &value).await? {
                latchkey::FencedWrite::Rejected { seen } => FencedOutcome {
                    accepted: false,
                    seen: Some(seen.into()),
                },
                _ => FencedOutcome {
                    accepted: true,
                    seen: None,
                },
            })
        })
    }

    /// Raises the highest token seen to `token` (after a revocation).
    #[napi(ts_return_type = "Promise<bigint>")]
    pub fn raise(&self, env: Env, token: BigInt) -> napi::Result<Promise<BigInt>> {
        let token = token_u64(token).map_err(to_js)?;
        let fenced = self.inner.clone();
        promise(&env, async move { Ok(fenced.raise(token).await?.into()) })
    }

    /// The value stored and its token, or null.
    #[napi(ts_return_type = "Promise<[Buffer, bigint] | null>")]
    pub fn read(&self, env: Env) -> napi::Result<Promise<Option<(Buffer, BigInt)>>> {
        let fenced = self.inner.clone();
        promise(&env, async move {
            Ok(fenced
                .read()
                .await?
                .map(|(value, token)| (value.into(), token.into())))
        })
    }
}
