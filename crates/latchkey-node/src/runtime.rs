//! Promises over the library's futures (run on executor.rs's runtime,
//! settled by napi-rs), and the cancellation of a wait by the facade's
//! AbortSignal, by its client's close() or by its environment's end.

use std::cell::RefCell;
use std::future::Future;
use std::time::Instant;

use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{Env, JsDeferred, JsValue};
use napi_derive::napi;
use tokio_util::sync::CancellationToken;

use crate::errors::{aborted, to_js, to_js_after};

/// What a native call returns: the Promise `settled` made (its lifetime is
/// the call's; the method's return converts it at once).
pub(crate) type Promise<T> = PromiseRaw<'static, T>;

/// One wait's cancellation: the facade makes one per wait that has an
/// AbortSignal and calls `cancel()` on its `abort` event. The wait's Rust
/// future is then dropped, which the library makes safe (a lock it may have
/// taken is released in the background, a fair waiter leaves the queue).
#[napi]
pub struct Cancel {
    token: CancellationToken,
}

#[napi]
impl Cancel {
    #[napi(constructor)]
    pub fn new() -> Self {
        Cancel {
            token: CancellationToken::new(),
        }
    }

    /// Gives the wait up (idempotent).
    #[napi]
    pub fn cancel(&self) {
        self.token.cancel();
    }
}

impl Default for Cancel {
    fn default() -> Self {
        Cancel::new()
    }
}

/// The token of an optional `Cancel`.
pub(crate) fn token(cancel: Option<&Cancel>) -> Option<CancellationToken> {
    cancel.map(|c| c.token.clone())
}

/// A Promise of `fut`'s answer.
pub(crate) fn promise<T, F>(env: &Env, fut: F) -> napi::Result<Promise<T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
{
    let started = Instant::now();
    settled(env, async move {
        fut.await
            .map_err(|e| to_js_after(e, Some(started.elapsed())))
    })
}

/// A Promise of `fut`'s answer that rejects with ABORTED (and drops `fut`)
/// when `cancel` fires first, and with CLIENT_CLOSED when `closing` (the
/// client's close) does: a wait never outlives its client's close().
pub(crate) fn cancellable<T, F>(
    env: &Env,
    cancel: Option<CancellationToken>,
    closing: CancellationToken,
    fut: F,
) -> napi::Result<Promise<T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
{
    let started = Instant::now();
    settled(env, async move {
        let aborted_by = async {
            match &cancel {
                Some(cancel) => cancel.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = closing.cancelled() => Err(to_js(crate::errors::closed())),
            _ = aborted_by => Err(aborted()),
            answer = fut => answer.map_err(|e| to_js_after(e, Some(started.elapsed()))),
        }
    })
}

type Resolve<T> = Box<dyn FnOnce(Env) -> napi::Result<T> + Send>;

/// A call in flight: settles its Promise once, with the answer, or (if its
/// task is dropped unanswered: a panic, no runtime) with an error.
struct Pending<T: ToNapiValue + 'static>(Option<JsDeferred<T, Resolve<T>>>);

impl<T: ToNapiValue + 'static> Drop for Pending<T> {
    fn drop(&mut self) {
        if let Some(deferred) = self.0.take() {
            deferred.reject(napi::Error::from_reason(
                "[INTERNAL] the call ended unanswered",
            ));
        }
    }
}

thread_local! {
    /// This thread's environment and the token its end fires.
    static ENDED: RefCell<Option<(usize, CancellationToken)>> = const { RefCell::new(None) };
}

/// Fired when this environment is torn down (a worker terminated): the
/// calls still in flight are dropped then, not left running on the
/// process's runtime (a wait would otherwise take its lock later, for
/// nobody). Dropping them is what the library makes safe.
pub(crate) fn ended(env: &Env) -> napi::Result<CancellationToken> {
    let raw = env.raw() as usize;
    let known = ENDED.with(|e| {
        e.borrow()
            .as_ref()
            .filter(|(at, _)| *at == raw)
            .map(|(_, token)| token.clone())
    });
    if let Some(token) = known {
        return Ok(token);
    }
    let token = CancellationToken::new();
    env.add_env_cleanup_hook(token.clone(), |token| token.cancel())?;
    ENDED.with(|e| *e.borrow_mut() = Some((raw, token.clone())));
    Ok(token)
}

/// A Promise of `fut`'s answer, napi-rs's own (a `JsDeferred`: what its
/// `AsyncBlock` and `Env::spawn_future` settle through), `fut` run on the
/// package's runtime. A pending call keeps the event loop alive, as any
/// Promise-returning I/O in Node does. One completion queue per thread
/// instead was 4–5 % faster on p50 uncontended and about 10 % on cycles/s
/// with 16 calls in flight, for 330 lines of unsafe N-API code; measured in
/// bench/RESULTS.md, section
/// "latchkey-node: the completion queue against per-call AsyncBlock".
fn settled<T, F>(env: &Env, fut: F) -> napi::Result<Promise<T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = napi::Result<T>> + Send + 'static,
{
    let ended = ended(env)?;
    let (deferred, promise) = env.create_deferred::<T, Resolve<T>>()?;
    let raw = promise.raw();
    let mut pending = Pending(Some(deferred));
    // Without a runtime (it could not start) the future is dropped unrun:
    // `Pending` then rejects the Promise.
    let _ = crate::executor::spawn(async move {
        let answer = tokio::select! {
            biased;
            // Unsettled: the Promise is gone with its environment, and
            // its thread-safe function may be closing already.
            _ = ended.cancelled() => {
                drop(pending.0.take());
                return;
            }
            answer = fut => answer,
        };
        if let Some(deferred) = pending.0.take() {
            match answer {
                Ok(value) => deferred.resolve(Box::new(move |_| Ok(value))),
                Err(e) => deferred.reject(e),
            }
        }
    });
    Ok(PromiseRaw::new(env.raw(), raw))
}
