//! The native client: `connect`, the factories of every primitive, signals,
//! operators' calls (revoke, request-release) and `close`.

use std::sync::Arc;

use napi::bindgen_prelude::Buffer;
use napi::Env;
use napi_derive::napi;

use crate::acquire::Acquirer;
use crate::args::{count, ms, opt_ms};
use crate::core::{ConnectOptions, Core};
use crate::errors::{invalid, to_js};
use crate::primitives::{Barrier, Election, Fenced, Latch, RwLock, Semaphore};
use crate::runtime::promise;
use crate::runtime::Promise;

/// How a hold is taken and kept (the facade's options of `lock`,
/// `lockAll`, `semaphore`, `rwlock`).
#[napi(object)]
pub struct HoldOptions {
    pub ttl_ms: f64,
    pub watchdog: Option<bool>,
    pub fencing: Option<bool>,
    pub max_hold_ms: Option<f64>,
    pub stop_margin_ms: Option<f64>,
    pub renew_every_ms: Option<f64>,
    pub asking: Option<bool>,
    pub hold_at_least_ms: Option<f64>,
    /// A lock only: FIFO across processes.
    pub fair: Option<bool>,
    /// A lock only: keep a released hold while idle, at most this long.
    pub cached_ms: Option<f64>,
}

/// The options every lease primitive shares, set on any of them.
fn configured<P: latchkey::HoldOptions>(mut p: P, o: &HoldOptions) -> latchkey::Result<P> {
    if o.watchdog != Some(false) {
        p = p.with_watchdog();
    }
    if let Some(every) = opt_ms("renewEvery", o.renew_every_ms)? {
        p = p.with_renewal_every(every)?;
    }
    if o.fencing == Some(true) {
        p = p.with_fencing();
    }
    if let Some(cap) = opt_ms("maxHold", o.max_hold_ms)? {
        p = p.with_max_hold(cap)?;
    }
    if let Some(margin) = opt_ms("stopMargin", o.stop_margin_ms)? {
        p = p.with_stop_margin(margin)?;
    }
    if o.asking == Some(true) {
        p = p.with_asking();
    }
    if let Some(least) = opt_ms("holdAtLeast", o.hold_at_least_ms)? {
        p = p.with_hold_at_least(least)?;
    }
    Ok(p)
}

/// Options only a single lock takes, refused elsewhere.
fn no_lock_only(what: &str, o: &HoldOptions) -> latchkey::Result<()> {
    if o.fair.is_some() || o.cached_ms.is_some() {
        return Err(invalid(format!("{what} takes no fair or cached option")));
    }
    Ok(())
}

/// One revocation's outcome.
#[napi(object)]
pub struct RevocationInfo {
    pub kind: String,
    pub ended: f64,
    pub fencing_token: Option<napi::bindgen_prelude::BigInt>,
}

/// Connects (the native half of `Client.connect` and `Redlock.connect`).
#[napi(ts_return_type = "Promise<Client>")]
pub fn connect(env: Env, options: ConnectOptions) -> napi::Result<Promise<Client>> {
    // Registered with its environment, whose end gives its holds back.
    let envs = crate::envs::of(&env)?;
    promise(&env, async move {
        let core = Core::connect(options).await?;
        envs.add(&core);
        Ok(Client { core })
    })
}

#[napi]
pub struct Client {
    pub(crate) core: Arc<Core>,
}

#[napi]
impl Client {
    #[napi(getter)]
    pub fn prefix(&self) -> Buffer {
        self.core.prefix().into()
    }

    #[napi(getter)]
    pub fn is_redlock(&self) -> bool {
        self.core.client.redlock().is_some()
    }

    /// A Redlock's instance count and quorum; null for a client.
    #[napi]
    pub fn quorum(&self) -> Option<Vec<u32>> {
        let redlock = self.core.client.redlock()?;
        Some(vec![redlock.instances() as u32, redlock.quorum() as u32])
    }

    #[napi]
    pub fn lock(&self, name: String, options: HoldOptions) -> napi::Result<Acquirer> {
        self.make_lock(name, options).map_err(to_js)
    }

    #[napi]
    pub fn lock_all(&self, names: Vec<String>, options: HoldOptions) -> napi::Result<Acquirer> {
        self.make_lock_all(names, options).map_err(to_js)
    }

    #[napi]
    pub fn semaphore(
        &self,
        name: String,
        permits: f64,
        options: HoldOptions,
    ) -> napi::Result<Semaphore> {
        let make = || -> latchkey::Result<Semaphore> {
            no_lock_only("a semaphore", &options)?;
            let permits = count("permits", permits)?;
            let ttl = ms("ttl", options.ttl_ms)?;
            let client = self.core.client()?;
            let semaphore = configured(client.semaphore(&name, permits, ttl)?, &options)?;
            Ok(Semaphore {
                inner: semaphore,
                core: self.core.clone(),
            })
        };
        make().map_err(to_js)
    }

    #[napi]
    pub fn rwlock(&self, name: String, options: HoldOptions) -> napi::Result<RwLock> {
        let make = || -> latchkey::Result<RwLock> {
            no_lock_only("a read-write lock", &options)?;
            let ttl = ms("ttl", options.ttl_ms)?;
            let rw = configured(self.core.client()?.rwlock(&name, ttl)?, &options)?;
            Ok(RwLock {
                inner: rw,
                core: self.core.clone(),
            })
        };
        make().map_err(to_js)
    }

    #[napi]
    pub fn latch(&self, name: String, ttl_ms: f64) -> napi::Result<Latch> {
        let make = || -> latchkey::Result<Latch> {
            let ttl = ms("ttl", ttl_ms)?;
            Ok(Latch {
                inner: self.core.client()?.latch(&name, ttl)?,
                core: self.core.clone(),
            })
        };
        make().map_err(to_js)
    }

    #[napi]
    pub fn barrier(&self, name: String, parties: f64, ttl_ms: f64) -> napi::Result<Barrier> {
        let make = || -> latchkey::Result<Barrier> {
            let parties = count("parties", parties)?;
            let ttl = ms("ttl", ttl_ms)?;
            Ok(Barrier {
                inner: self.core.client()?.barrier(&name, parties, ttl)?,
                core: self.core.clone(),
            })
        };
        make().map_err(to_js)
    }

    #[napi]
    pub fn election(&self, name: String, ttl_ms: f64) -> napi::Result<Election> {
        let make = || -> latchkey::Result<Election> {
            let ttl = ms("ttl", ttl_ms)?;
            Ok(Election {
                inner: self.core.client()?.election(&name, ttl)?,
                core: self.core.clone(),
            })
        };
        make().map_err(to_js)
    }

    #[napi]
    pub fn fenced(&self, name: String) -> napi::Result<Fenced> {
        let make = || -> latchkey::Result<Fenced> {
            Ok(Fenced {
                inner: Arc::new(self.core.client()?.fenced(&name)?),
            })
        };
        make().map_err(to_js)
    }

    /// Sends `payload` to whoever listens on `name` now: how many heard it.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn signal(
        &self,
        env: Env,
        name: String,
        payload: Buffer,
        one: bool,
    ) -> napi::Result<Promise<u32>> {
        let core = self.core.clone();
        let payload = payload.to_vec();
        promise(&env, async move {
            let client = core.client()?;
            let heard = match one {
                true => client.signal_one(&name, &payload).await? as u32,
                false => client.signal(&name, &payload).await? as u32,
            };
            Ok(heard)
        })
    }

    #[napi(ts_return_type = "Promise<Listener>")]
    pub fn listen(
        &self,
        env: Env,
        names: Vec<String>,
        patterns: bool,
    ) -> napi::Result<Promise<crate::signals::Listener>> {
        let core = self.core.clone();
        promise(&env, async move {
            let client = core.client()?;
            let listener = match patterns {
                true => client.listen_patterns(&names).await?,
                false => client.listen(&names).await?,
            };
            Ok(crate::signals::Listener::new(listener, core.closing()))
        })
    }

    /// Ends every hold of `name` (an operator's call).
    #[napi(ts_return_type = "Promise<RevocationInfo[]>")]
    pub fn revoke(&self, env: Env, name: String) -> napi::Result<Promise<Vec<RevocationInfo>>> {
        let core = self.core.clone();
        promise(&env, async move {
            let revoked = core.client()?.revoke(&name).await?;
            Ok(revoked
                .into_iter()
                .map(|r| RevocationInfo {
                    kind: r.kind.as_str().to_owned(),
                    ended: r.ended as f64,
                    fencing_token: r.fencing_token.map(Into::into),
                })
                .collect())
        })
    }

    /// Asks the holders of `name` to let go: how many were asked.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn request_release(&self, env: Env, name: String) -> napi::Result<Promise<f64>> {
        let core = self.core.clone();
        promise(&env, async move {
            Ok(core.client()?.request_release(&name).await? as f64)
        })
    }

    /// Gives back every hold, waits at most `within_ms` for the background
    /// releases, and refuses later calls: whether all finished.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn close(&self, env: Env, within_ms: f64) -> napi::Result<Promise<bool>> {
        let within = ms("within", within_ms).map_err(to_js)?;
        let core = self.core.clone();
        promise(&env, async move { Ok(core.close(within).await) })
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn flush(&self, env: Env, within_ms: f64) -> napi::Result<Promise<bool>> {
        let within = ms("within", within_ms).map_err(to_js)?;
        let core = self.core.clone();
        promise(&env, async move { Ok(core.flush(within).await) })
    }
}

impl Client {
    fn make_lock(&self, name: String, o: HoldOptions) -> latchkey::Result<Acquirer> {
        self.core.check_open()?;
        let ttl = ms("ttl", o.ttl_ms)?;
        let mut lock = configured(self.core.client.lock(&name, ttl)?, &o)?;
        if o.fair == Some(true) {
            lock = lock.fair()?;
        }
        // A kept lock made with fencing issues each hold's token at its
        // acquisition, as a plain one does.
        let inner: Arc<dyn latchkey::Acquire> = match opt_ms("cached", o.cached_ms)? {
            Some(idle) => Arc::new(lock.with_caching(idle)?),
            None => Arc::new(lock),
        };
        Ok(Acquirer {
            inner,
            core: self.core.clone(),
        })
    }

    fn make_lock_all(&self, names: Vec<String>, o: HoldOptions) -> latchkey::Result<Acquirer> {
        self.core.check_open()?;
        no_lock_only("lockAll", &o)?;
        let ttl = ms("ttl", o.ttl_ms)?;
        let locks = self.core.client.lock_all(&names, ttl)?;
        Ok(Acquirer {
            inner: Arc::new(configured(locks, &o)?),
            core: self.core.clone(),
        })
    }
}
