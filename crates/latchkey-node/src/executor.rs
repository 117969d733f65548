//! The runtime every future of the package runs on, and the only ways the
//! package reaches it: none of them can panic, since they run in
//! finalizers, env cleanup hooks and at exit, where a panic would cross
//! N-API and abort the process.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

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

/// Started when the addon is loaded, so that nothing later (a finalizer,
/// a cleanup hook) is the first to start it.
#[napi_derive::module_init]
fn init() {
    let _ = runtime();
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
