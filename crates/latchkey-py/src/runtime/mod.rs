//! The tokio runtime every client of this process shares, rebuilt after a
//! fork, and the one way a call runs in either API (`Mode`, `run`):
//! blocking (blocking.rs: waited on in slices, so that Ctrl-C gets through)
//! or as an asyncio coroutine (aio.rs).

mod aio;
mod blocking;
mod green;
mod orphans;

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use tokio::runtime::{Handle, Runtime};

use crate::errors;

pub(crate) use aio::{awaitable, coroutine};
pub(crate) use blocking::{block_on, block_on_at_exit, cancelled_dropped, end_waits};

/// How long the interpreter's exit waits for the runtime's tasks.
const SHUTDOWN_WITHIN: Duration = Duration::from_millis(500);

enum State {
    /// Not made yet in this process.
    None,
    /// Made by the process whose id this is.
    Running(u32, Runtime),
    /// Shut down at interpreter exit: nothing runs any more.
    Shut,
}

static RUNTIME: Mutex<State> = Mutex::new(State::None);

/// This process's id. A fork gives the child a new one, and with it a new
/// runtime (the parent's threads do not exist in the child).
pub(crate) fn pid() -> u32 {
    std::process::id()
}

/// A handle on this process's runtime, made on first use (a client made
/// and not used before a fork has started no thread) and again after a
/// fork. The parent's runtime is forgotten in the child, not dropped:
/// dropping it would wait for worker threads the child does not have.
pub(crate) fn handle() -> PyResult<Handle> {
    let mut state = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    if let State::Running(owner, runtime) = &*state {
        if *owner == pid() {
            return Ok(runtime.handle().clone());
        }
    }
    if matches!(*state, State::Shut) {
        return Err(errors::closed(
            "the interpreter is exiting: latchkey's runtime is shut down",
        ));
    }
    // One worker: it drives the sockets for every Python thread, which wait
    // without the GIL; a second only added cross-thread wake-ups (the two
    // woke each other to steal the connection's task) to every call, CPU
    // per call with no gain in hand-off latency (bench/RESULTS.md).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("latchkey")
        .enable_all()
        .build()
        .map_err(|e| errors::closed(&format!("cannot start latchkey's runtime: {e}")))?;
    let handle = runtime.handle().clone();
    // The thread that logs the library's events starts with the runtime,
    // whose work makes them (and again in a forked child).
    crate::observe::log::start();
    if let State::Running(_, inherited) =
        std::mem::replace(&mut *state, State::Running(pid(), runtime))
    {
        std::mem::forget(inherited);
    }
    Ok(handle)
}

/// Stops the runtime (at interpreter exit, after the clients were flushed):
/// its tasks get `SHUTDOWN_WITHIN` to finish.
pub(crate) fn shutdown(py: Python<'_>) {
    let taken = std::mem::replace(
        &mut *RUNTIME.lock().unwrap_or_else(|p| p.into_inner()),
        State::Shut,
    );
    match taken {
        State::Running(owner, runtime) if owner == pid() => {
            py.detach(move || runtime.shutdown_timeout(SHUTDOWN_WITHIN))
        }
        State::Running(_, inherited) => std::mem::forget(inherited),
        _ => {}
    }
}

/// Drops `value` inside the runtime's context, so that what its `Drop`
/// spawns (a guard's background release) can run; in a forked child it is
/// the parent's, and forgotten.
pub(crate) fn drop_in_runtime<T>(value: T, made_by: u32) {
    if made_by != pid() {
        std::mem::forget(value);
        return;
    }
    match handle() {
        Ok(handle) => {
            let _entered = handle.enter();
            drop(value);
        }
        Err(_) => drop(value),
    }
}

/// Which API an object belongs to: every class has a blocking and an
/// asyncio twin over one Rust object, and this says which one it is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    Blocking,
    Asyncio,
}

/// `fut` run the way `mode` runs things: awaited in the blocking way (its
/// value), or as an asyncio coroutine named `Async{qualname}`.
pub(crate) fn run<F, T>(py: Python<'_>, mode: Mode, qualname: &str, fut: F) -> PyResult<Py<PyAny>>
where
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    match mode {
        Mode::Asyncio => Ok(awaitable(py, &format!("Async{qualname}"), fut)?.unbind()),
        Mode::Blocking => block_on(py, fut)?.into_py_any(py),
    }
}

/// A result that needs the GIL to become a Python object (a class of the
/// caller's mode): made by the closure once the Rust call is done.
type Maker = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

pub(crate) struct Make(Maker);

impl Make {
    pub(crate) fn new(
        make: impl FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send + 'static,
    ) -> Make {
        Make(Box::new(make))
    }

    /// The Python object, now.
    pub(crate) fn made(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        (self.0)(py)
    }
}

impl<'py> IntoPyObject<'py> for Make {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        Ok((self.0)(py)?.into_bound(py))
    }
}
