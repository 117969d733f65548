//! Every hold, whatever its kind (a lock's, a kept lock's, several locks',
//! a permit, a read or write hold, a leadership): one `latchkey::Kept`
//! under one JavaScript class, `Guard`, which lib/guard.js wraps. The
//! client keeps the hold (and so its renewals) until it is released or
//! forgotten, lost, or the client is closed: JavaScript collecting the
//! guard object ends nothing.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use latchkey::{Kept, Leadership, LostReason, Ownership};
use napi::bindgen_prelude::{BigInt, Function};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::Env;
use napi_derive::napi;

use crate::args::{epoch_ms, ms};
use crate::core::Core;
use crate::runtime::promise;
use crate::runtime::Promise;

/// A hold (the native half of lib/guard.js's `Guard`): what its client
/// keeps, and what only Node adds to it.
#[napi]
pub struct Guard {
    pub(crate) kept: Kept,
    /// A leadership's value (what it campaigned with), for after its release.
    value: Option<Vec<u8>>,
    /// Why it was lost, as first told (the signal and lostReason agree).
    told: Arc<OnceLock<LostReason>>,
}

impl Guard {
    /// `guard`, kept by `core`'s client: CLIENT_CLOSED once it is closed
    /// (the close ended the hold already).
    pub(crate) fn keep(guard: Box<dyn latchkey::Guard>, core: &Core) -> latchkey::Result<Guard> {
        let value = guard
            .as_any()
            .downcast_ref::<Leadership>()
            .map(Leadership::value);
        Ok(Guard {
            kept: core.client.keep(guard)?,
            value,
            told: Arc::default(),
        })
    }
}

/// Why the hold is lost, or None while it is held (and once released or
/// forgotten). A hold whose deadline passed before the loss was seen (its
/// process was stopped or starved past it) ran out of time: EXPIRED, not
/// the renewals' UNREACHABLE or the key's GONE.
fn loss(kept: &Kept, told: &OnceLock<LostReason>) -> Option<LostReason> {
    if kept.is_ended() {
        return None;
    }
    if let Some(known) = told.get() {
        return Some(*known);
    }
    let why = match kept.lost_reason()? {
        LostReason::Unreachable | LostReason::Gone if Instant::now() >= kept.deadline() => {
            LostReason::Expired
        }
        why => why,
    };
    Some(*told.get_or_init(|| why))
}

/// `result` of a call on `kept`, or `or()` when the call found the hold
/// released or forgotten (the library's NOT_HELD).
pub(crate) fn unless_ended<R>(
    kept: &Kept,
    result: latchkey::Result<R>,
    or: impl FnOnce() -> latchkey::Result<R>,
) -> latchkey::Result<R> {
    match result {
        Err(latchkey::Error::NotHeld { .. }) if kept.is_ended() => or(),
        result => result,
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

#[napi]
impl Guard {
    #[napi(getter)]
    pub fn name(&self) -> String {
        String::from_utf8_lossy(self.kept.name()).into_owned()
    }

    /// The owner token Redis keeps for the hold.
    #[napi(getter)]
    pub fn token(&self) -> String {
        self.kept.token().to_owned()
    }

    #[napi(getter)]
    pub fn ttl_ms(&self) -> f64 {
        self.kept.ttl().as_secs_f64() * 1000.0
    }

    /// A leadership's value (the campaign's, or the last `proclaim`'s),
    /// else null.
    #[napi(getter)]
    pub fn value(&self) -> Option<napi::bindgen_prelude::Buffer> {
        self.kept
            .with_guard(|g| {
                g.as_any()
                    .downcast_ref::<Leadership>()
                    .map(Leadership::value)
            })
            .flatten()
            .or_else(|| self.value.clone())
            .map(Into::into)
    }

    #[napi]
    pub fn is_held(&self) -> bool {
        self.kept.is_held()
    }

    /// Until when the hold may be assumed, on `Date.now()`'s clock (null
    /// once released).
    #[napi]
    pub fn deadline(&self) -> Option<f64> {
        (!self.kept.is_ended()).then(|| epoch_ms(self.kept.deadline()))
    }

    /// The code of why the hold was lost, and its phrase (null while held,
    /// and once released): the deadline is looked at now, so a process
    /// stopped past it reads it lost at once.
    #[napi]
    pub fn lost_reason(&self) -> Option<Vec<String>> {
        let (code, said) = reason(Some(loss(&self.kept, &self.told)?));
        Some(vec![code, said])
    }

    /// Releases if still ours: whether it was ours to the end (idempotent).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release(&self, env: Env) -> napi::Result<Promise<bool>> {
        let kept = self.kept.clone();
        promise(&env, async move {
            Ok(kept.release().await? == Some(Ownership::Owned))
        })
    }

    /// Resets the TTL to `ttl_ms` from now: whether it was still ours.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn extend(&self, env: Env, ttl_ms: f64) -> napi::Result<Promise<bool>> {
        let ttl = ms("ttl", ttl_ms).map_err(crate::errors::to_js)?;
        let kept = self.kept.clone();
        promise(&env, async move {
            let found = kept.extend(ttl).await.map(|o| o == Ownership::Owned);
            unless_ended(&kept, found, || Ok(false))
        })
    }

    /// The fencing token (issued by one round trip on the first call,
    /// unless it came with the hold).
    #[napi(ts_return_type = "Promise<bigint>")]
    pub fn fencing_token(&self, env: Env) -> napi::Result<Promise<BigInt>> {
        let kept = self.kept.clone();
        promise(&env, async move {
            Ok(BigInt::from(kept.fencing_token().await?))
        })
    }

    /// Every fencing token (one per lock of a lockAll).
    #[napi(ts_return_type = "Promise<bigint[]>")]
    pub fn fencing_tokens(&self, env: Env) -> napi::Result<Promise<Vec<BigInt>>> {
        let kept = self.kept.clone();
        promise(&env, async move {
            let tokens = kept.fencing_tokens().await?;
            Ok(tokens.into_iter().map(BigInt::from).collect())
        })
    }

    /// The fencing token if it was issued already (a leadership's term).
    #[napi]
    pub fn issued_fencing_token(&self) -> Option<BigInt> {
        self.kept.issued_fencing_token().map(BigInt::from)
    }

    /// Calls `callback([code, phrase])` once when the hold is lost (not when
    /// it is released, nor as its environment ends). Weak: it never keeps
    /// the process alive by itself.
    #[napi(ts_args_type = "callback: (lost: [code: string, phrase: string]) => void")]
    pub fn on_lost(&self, env: Env, callback: Function<(String, String), ()>) -> napi::Result<()> {
        let tsfn = callback
            .build_threadsafe_function::<(String, String)>()
            .weak::<true>()
            .build()?;
        // The watch of a hold without a watchdog starts a timer task.
        let signal = crate::executor::within(|| self.kept.lost_signal()).unwrap_or_default();
        let (kept, told) = (self.kept.clone(), self.told.clone());
        let torn_down = crate::runtime::ended(&env)?;
        crate::executor::spawn(async move {
            tokio::select! {
                biased;
                _ = torn_down.cancelled() => {}
                _ = kept.ended() => {}
                _ = signal.lost() => {
                    let (code, said) = reason(loss(&kept, &told).or(Some(LostReason::Expired)));
                    tsfn.call((code, said), ThreadsafeFunctionCallMode::NonBlocking);
                }
            }
        })
    }

    /// Calls `callback()` each time another process asks for the hold
    /// (`requestRelease`, a waiter made with `asking`), until it is
    /// released or lost; weak, as onLost.
    #[napi(ts_args_type = "callback: () => void")]
    pub fn on_release_requested(&self, env: Env, callback: Function<(), ()>) -> napi::Result<()> {
        let tsfn = callback
            .build_threadsafe_function::<()>()
            .weak::<true>()
            .build()?;
        let kept = self.kept.clone();
        let torn_down = crate::runtime::ended(&env)?;
        crate::executor::spawn(async move {
            loop {
                // A release waits for the request's listener: it ends first.
                let heard = tokio::select! {
                    biased;
                    _ = torn_down.cancelled() => return,
                    _ = kept.ended() => return,
                    _ = kept.lost() => return,
                    heard = kept.release_requested() => heard,
                };
                if heard.is_err() {
                    return;
                }
                tsfn.call((), ThreadsafeFunctionCallMode::NonBlocking);
            }
        })
    }
}
