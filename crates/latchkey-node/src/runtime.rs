//! Promises over the library's futures (run on napi-rs's tokio runtime,
//! settled through completions.rs), and the cancellation of a wait by the
//! facade's AbortSignal.

use std::future::Future;

use napi::bindgen_prelude::ToNapiValue;
use napi::Env;
use napi_derive::napi;
use tokio_util::sync::CancellationToken;

use crate::completions::{self, Promise};
use crate::errors::{aborted, to_js};

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
    completions::promise(env, async move { fut.await.map_err(to_js) })
}

/// A Promise of `fut`'s answer that rejects with ABORTED (and drops `fut`)
/// when `cancel` fires first.
pub(crate) fn cancellable<T, F>(
    env: &Env,
    cancel: Option<CancellationToken>,
    fut: F,
) -> napi::Result<Promise<T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
{
    completions::promise(env, async move {
        match cancel {
            None => fut.await.map_err(to_js),
            Some(token) => tokio::select! {
                biased;
                _ = token.cancelled() => Err(aborted()),
                answer = fut => answer.map_err(to_js),
            },
        }
    })
}

/// Drops `value` where the library's drops may spawn (a guard released in
/// the background): inside the runtime.
pub(crate) fn drop_in_runtime<T>(value: T) {
    napi::bindgen_prelude::within_runtime_if_available(move || drop(value));
}

/// The runtime the promises run on: one worker thread. A Node process
/// drives it from one JavaScript thread; a second worker only added
/// cross-thread wake-ups (stealing) to every call, which cost CPU per cycle.
#[napi_derive::module_init]
fn init() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("latchkey-node")
        .enable_all()
        .build();
    if let Ok(runtime) = runtime {
        napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
    }
}
