//! The package's runtime, promises over the library's futures (settled
//! through completions.rs), and the cancellation of a wait by the facade's
//! AbortSignal or by its client's close().

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
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

/// The runtime every future of the package runs on: one worker thread
/// (a Node process drives it from one JavaScript thread; a second worker
/// only added cross-thread wake-ups to every call). It is the package's
/// own and lives as long as the process: napi-rs's runtime is shut down
/// when the last environment that loaded the addon is torn down (a worker
/// thread's), after which a guard finalized or a wait settled there had no
/// runtime to release on, and its panic aborted the process.
fn runtime() -> Option<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("latchkey-node")
                .enable_all()
                .build()
                .ok()
        })
        .as_ref()
}

fn no_runtime() -> napi::Error {
    crate::errors::coded("INTERNAL", "the native layer could not start its runtime")
}

/// Runs `fut` on the runtime (never panics: without a runtime, nothing runs).
pub(crate) fn spawn<F>(fut: F) -> napi::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let runtime = runtime().ok_or_else(no_runtime)?;
    drop(runtime.spawn(fut));
    Ok(())
}

/// Blocks this (JavaScript) thread on `fut`, at most until it completes.
pub(crate) fn block_on<F: Future>(fut: F) -> Option<F::Output> {
    let runtime = runtime()?;
    // Inside a runtime thread, block_on would panic: never the case from
    // JavaScript, but a panic here would cross N-API.
    if tokio::runtime::Handle::try_current().is_ok() {
        return None;
    }
    catch_unwind(AssertUnwindSafe(|| runtime.block_on(fut))).ok()
}

/// Runs `f` inside the runtime's context (what the library's drops need to
/// spawn their background releases), from any thread, at any time: in a
/// finalizer, an env cleanup hook or at exit. A panic is caught and
/// dropped: it must never cross N-API.
pub(crate) fn within<T>(f: impl FnOnce() -> T) -> Option<T> {
    catch_unwind(AssertUnwindSafe(|| match runtime() {
        Some(runtime) => {
            let _entered = runtime.enter();
            f()
        }
        None => f(),
    }))
    .ok()
}

/// Drops `value` where the library's drops may spawn (a guard released in
/// the background): inside the runtime, without ever panicking.
pub(crate) fn drop_in_runtime<T>(value: T) {
    let _ = within(move || drop(value));
}
