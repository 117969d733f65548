//! Promises over the library's futures (run on executor.rs's runtime,
//! settled through completions.rs), and the cancellation of a wait by the
//! facade's AbortSignal or by its client's close().

use std::future::Future;
use std::time::Instant;

use napi::bindgen_prelude::ToNapiValue;
use napi::Env;
use napi_derive::napi;
use tokio_util::sync::CancellationToken;

use crate::completions::{self, Promise};
use crate::errors::{aborted, to_js, to_js_after};

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
    completions::promise(env, async move {
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
    completions::promise(env, async move {
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
