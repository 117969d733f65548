//! Every hold, whatever its kind (a lock's, a kept lock's, several locks',
//! a permit, a read or write hold, a leadership): one `Box<dyn latchkey::Guard>`
//! under one JavaScript class, `Guard`, which lib/guard.js wraps.

use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use latchkey::{LostReason, Ownership};
use napi::bindgen_prelude::{BigInt, Function};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::Env;
use napi_derive::napi;
use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;

use crate::args::{epoch_ms, ms};
use crate::core::{Core, Releasable};
use crate::executor::drop_in_runtime;
use crate::runtime::promise;
use crate::runtime::Promise;

/// A hold shared by its JavaScript object, the calls in flight on it and
/// its client's registry, which keeps it (and so its renewals) while it is
/// held: JavaScript collecting the guard object ends nothing.
pub(crate) struct Holding {
    /// `None` once released.
    pub(crate) guard: RwLock<Option<Box<dyn latchkey::Guard>>>,
    pub(crate) name: String,
    token: String,
    ttl: Duration,
    /// A leadership's value (what it campaigned with).
    value: Option<Vec<u8>>,
    /// Fired by release(), for the listeners that wait on the hold.
    released: CancellationToken,
    core: Arc<Core>,
    id: OnceLock<u64>,
    /// Why it was lost, as first told (the signal and lostReason agree).
    lost_as: OnceLock<LostReason>,
}

impl Holding {
    pub(crate) fn new(
        guard: Box<dyn latchkey::Guard>,
        core: &Arc<Core>,
        value: Option<Vec<u8>>,
    ) -> latchkey::Result<Arc<Holding>> {
        let holding = Arc::new(Holding {
            name: String::from_utf8_lossy(guard.name()).into_owned(),
            token: guard.token().to_owned(),
            ttl: guard.ttl(),
            value,
            guard: RwLock::new(Some(guard)),
            released: CancellationToken::new(),
            core: core.clone(),
            id: OnceLock::new(),
            lost_as: OnceLock::new(),
        });
        // Refused once the client is closed: the hold is then dropped,
        // which releases it in the background.
        let id = core.track(holding.clone() as Arc<dyn Releasable>)?;
        let _ = holding.id.set(id);
        Ok(holding)
    }

    /// Why the hold is lost, or None while it is held (and once released).
    /// A hold whose deadline passed before the loss was seen (its process
    /// was stopped or starved past it) ran out of time: EXPIRED, not the
    /// renewals' UNREACHABLE or the key's GONE.
    pub(crate) fn loss(&self) -> Option<LostReason> {
        if self.released.is_cancelled() {
            return None;
        }
        let Ok(held) = self.guard.try_read() else {
            return self.lost_as.get().copied();
        };
        let guard = held.as_ref()?;
        if let Some(known) = self.lost_as.get() {
            return Some(*known);
        }
        let why = guard.lost_reason()?;
        let why = match why {
            LostReason::Unreachable | LostReason::Gone if Instant::now() >= guard.deadline() => {
                LostReason::Expired
            }
            why => why,
        };
        Some(*self.lost_as.get_or_init(|| why))
    }

    /// Releases if still ours: whether it was ours to the end (idempotent).
    pub(crate) async fn release(&self) -> latchkey::Result<bool> {
        self.released.cancel();
        let taken = self.guard.write().await.take();
        if let Some(id) = self.id.get() {
            self.core.forget(*id);
        }
        match taken {
            Some(guard) => Ok(guard.release().await? == Ownership::Owned),
            None => Ok(false),
        }
    }
}

impl Holding {
    /// Lets go of the hold without releasing it (no more renewals; the key
    /// stays until its TTL): the owner token, None if it was released.
    pub(crate) async fn forget(&self) -> Option<String> {
        self.released.cancel();
        let taken = self.guard.write().await.take();
        if let Some(id) = self.id.get() {
            self.core.forget(*id);
        }
        taken.map(|guard| guard.forget())
    }

    /// `op` on the guard as the kind `G`, if it is one and still held.
    pub(crate) fn as_kind<G: 'static, R>(&self, op: impl FnOnce(&G) -> R) -> Option<R> {
        let held = self.guard.try_read().ok()?;
        held.as_ref()?.as_any().downcast_ref::<G>().map(op)
    }
}

impl Releasable for Holding {
    fn give_back(self: Arc<Self>) -> latchkey::BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = self.release().await;
        })
    }

    fn is_gone(&self) -> bool {
        let Ok(held) = self.guard.try_read() else {
            return false;
        };
        held.as_ref().is_some_and(|g| {
            let ended = g.deadline().checked_add(g.ttl());
            g.lost_reason().is_some() && ended.is_some_and(|end| Instant::now() > end)
        })
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        // Only a hold the registry let go of (released, forgotten, gone,
        // or refused at close) gets here: what is left of it is dropped on
        // the runtime, where nothing can panic into a finalizer.
        if let Some(guard) = self.guard.get_mut().take() {
            drop_in_runtime(guard);
        }
    }
}

/// A lost hold's reason, as its stable code and the library's phrase.
pub(crate) fn reason(reason: Option<LostReason>) -> (String, String) {
    let code = match reason {
        Some(LostReason::Revoked) => "REVOKED",
        Some(LostReason::MaxHold) => "MAX_HOLD",
        Some(LostReason::Expired) => "EXPIRED",
        Some(LostReason::Gone) => "GONE",
        Some(LostReason::TakenOver) => "TAKEN_OVER",
        Some(LostReason::Unreachable) => "UNREACHABLE",
        Some(LostReason::Closed) => "CLOSED",
        Some(_) => "LOST",
        None => "RELEASED",
    };
    let said = reason.map_or("it was released", LostReason::describe);
    (code.to_owned(), said.to_owned())
}

/// A hold (the native half of lib/guard.js's `Guard`).
#[napi]
pub struct Guard {
    pub(crate) holding: Arc<Holding>,
}

impl Guard {
    pub(crate) fn new(holding: Arc<Holding>) -> Guard {
        Guard { holding }
    }
}

#[napi]
impl Guard {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.holding.name.clone()
    }

    /// The owner token Redis keeps for the hold.
    #[napi(getter)]
    pub fn token(&self) -> String {
        self.holding.token.clone()
    }

    #[napi(getter)]
    pub fn ttl_ms(&self) -> f64 {
        self.holding.ttl.as_secs_f64() * 1000.0
    }

    /// A leadership's value (the campaign's, or the last `proclaim`'s),
    /// else null.
    #[napi(getter)]
    pub fn value(&self) -> Option<napi::bindgen_prelude::Buffer> {
        self.holding
            .as_kind(|g: &latchkey::Leadership| g.value().to_vec())
            .or_else(|| self.holding.value.clone())
            .map(Into::into)
    }

    #[napi]
    pub fn is_held(&self) -> bool {
        match self.holding.guard.try_read() {
            Ok(held) => held.as_ref().is_some_and(|g| g.is_held()),
            Err(_) => false,
        }
    }

    /// Until when the hold may be assumed, on `Date.now()`'s clock (null
    /// once released).
    #[napi]
    pub fn deadline(&self) -> Option<f64> {
        let held = self.holding.guard.try_read().ok()?;
        held.as_ref().map(|g| epoch_ms(g.deadline()))
    }

    /// The code of why the hold was lost, and its phrase (null while held,
    /// and once released): the deadline is looked at now, so a process
    /// stopped past it reads it lost at once.
    #[napi]
    pub fn lost_reason(&self) -> Option<Vec<String>> {
        let (code, said) = reason(Some(self.holding.loss()?));
        Some(vec![code, said])
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release(&self, env: Env) -> napi::Result<Promise<bool>> {
        let holding = self.holding.clone();
        promise(&env, async move { holding.release().await })
    }

    /// Resets the TTL to `ttl_ms` from now: whether it was still ours.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn extend(&self, env: Env, ttl_ms: f64) -> napi::Result<Promise<bool>> {
        let ttl = ms("ttl", ttl_ms).map_err(crate::errors::to_js)?;
        let holding = self.holding.clone();
        promise(&env, async move {
            let held = holding.guard.read().await;
            match &*held {
                Some(guard) => Ok(guard.extend(ttl).await? == Ownership::Owned),
                None => Ok(false),
            }
        })
    }

    /// The fencing token (issued by one round trip on the first call,
    /// unless it came with the hold).
    #[napi(ts_return_type = "Promise<bigint>")]
    pub fn fencing_token(&self, env: Env) -> napi::Result<Promise<BigInt>> {
        let holding = self.holding.clone();
        promise(&env, async move {
            let held = holding.guard.read().await;
            match &*held {
                Some(guard) => Ok(BigInt::from(guard.fencing_token().await?)),
                None => Err(latchkey::Error::NotHeld {
                    name: holding.name.clone(),
                }),
            }
        })
    }

    /// Every fencing token (one per lock of a lockAll).
    #[napi(ts_return_type = "Promise<bigint[]>")]
    pub fn fencing_tokens(&self, env: Env) -> napi::Result<Promise<Vec<BigInt>>> {
        let holding = self.holding.clone();
        promise(&env, async move {
            let held = holding.guard.read().await;
            match &*held {
                Some(guard) => Ok(guard
                    .fencing_tokens()
                    .await?
                    .into_iter()
                    .map(BigInt::from)
                    .collect()),
                None => Err(latchkey::Error::NotHeld {
                    name: holding.name.clone(),
                }),
            }
        })
    }

    /// The fencing token if it was issued already (a leadership's term).
    #[napi]
    pub fn issued_fencing_token(&self) -> Option<BigInt> {
        let held = self.holding.guard.try_read().ok()?;
        held.as_ref()?.issued_fencing_token().map(BigInt::from)
    }

    /// Calls `callback([code, phrase])` once when the hold is lost (not when
    /// it is released). Weak: it never keeps the process alive by itself.
    #[napi(ts_args_type = "callback: (lost: [code: string, phrase: string]) => void")]
    pub fn on_lost(&self, callback: Function<(String, String), ()>) -> napi::Result<()> {
        let tsfn = callback
            .build_threadsafe_function::<(String, String)>()
            .weak::<true>()
            .build()?;
        let holding = Arc::downgrade(&self.holding);
        let signal = {
            let held = self.holding.guard.try_read();
            match held.as_ref().ok().and_then(|h| h.as_ref()) {
                // The watch of a hold without a watchdog starts a timer task.
                Some(guard) => crate::executor::within(|| guard.lost_signal()).unwrap_or_default(),
                None => return Ok(()),
            }
        };
        let released = self.holding.released.clone();
        crate::executor::spawn(async move {
            tokio::select! {
                _ = released.cancelled() => {}
                _ = signal.lost() => {
                    let why = lost_reason_of(&holding).await;
                    let (code, said) = reason(why.or(Some(LostReason::Expired)));
                    tsfn.call((code, said), ThreadsafeFunctionCallMode::NonBlocking);
                }
            }
        })
    }

    /// Calls `callback()` each time another process asks for the hold
    /// (`requestRelease`, a waiter made with `asking`); weak, as onLost.
    #[napi(ts_args_type = "callback: () => void")]
    pub fn on_release_requested(&self, callback: Function<(), ()>) -> napi::Result<()> {
        let tsfn = callback
            .build_threadsafe_function::<()>()
            .weak::<true>()
            .build()?;
        let holding = Arc::downgrade(&self.holding);
        let released = self.holding.released.clone();
        crate::executor::spawn(async move {
            loop {
                let Some(holding) = holding.upgrade() else {
                    return;
                };
                let asked = async {
                    let held = holding.guard.read().await;
                    match &*held {
                        Some(guard) => guard.release_requested().await,
                        None => Err(crate::errors::closed()),
                    }
                };
                let heard = tokio::select! {
                    _ = released.cancelled() => return,
                    heard = asked => heard,
                };
                drop(holding);
                if heard.is_err() {
                    return;
                }
                tsfn.call((), ThreadsafeFunctionCallMode::NonBlocking);
            }
        })
    }
}

async fn lost_reason_of(holding: &Weak<Holding>) -> Option<LostReason> {
    let holding = holding.upgrade()?;
    // Waits for a call in flight on the guard (loss() does not wait).
    drop(holding.guard.read().await);
    holding.loss()
}
