//! An asyncio call: a coroutine (`latchkey._aio.Call`) that starts the
//! Rust future on the runtime when it first runs, through
//! pyo3-async-runtimes' generic bridge driven on this crate's runtime (its
//! own global one could not be rebuilt in a forked child).

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3_async_runtimes::TaskLocals;
use tokio::runtime::Runtime;

use super::blocking::{tracked, Cancel};
use super::handle;
use crate::errors;

/// The done-callback of an awaitable: a cancelled Python future marks its
/// Rust future cancelled at once (pyo3-async-runtimes drops it a moment
/// later, on the runtime).
#[pyclass(module = "latchkey._native", frozen)]
struct OnDone(Cancel);

#[pymethods]
impl OnDone {
    fn __call__(&self, fut: &Bound<'_, PyAny>) -> PyResult<()> {
        if fut.call_method0("cancelled")?.extract::<bool>()? {
            self.0.mark();
        }
        Ok(())
    }
}

/// A runtime nobody drives, for what is spawned after the shutdown: it is
/// never run (a pending awaitable stays pending, as any task of a runtime
/// that is gone).
fn idle() -> &'static Runtime {
    static IDLE: std::sync::OnceLock<Runtime> = std::sync::OnceLock::new();
    IDLE.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime without drivers needs no resources")
    })
}

/// pyo3-async-runtimes' generic runtime, spawning on `handle()`.
pub(crate) struct Shared;

tokio::task_local! {
    static TASK_LOCALS: std::cell::OnceCell<TaskLocals>;
}

impl pyo3_async_runtimes::generic::Runtime for Shared {
    type JoinError = tokio::task::JoinError;
    type JoinHandle = tokio::task::JoinHandle<()>;

    fn spawn<F>(fut: F) -> Self::JoinHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match handle() {
            Ok(handle) => handle.spawn(fut),
            Err(_) => idle().spawn(fut),
        }
    }

    fn spawn_blocking<F>(f: F) -> Self::JoinHandle
    where
        F: FnOnce() + Send + 'static,
    {
        match handle() {
            Ok(handle) => handle.spawn_blocking(f),
            Err(_) => idle().spawn(async {}),
        }
    }
}

impl pyo3_async_runtimes::generic::ContextExt for Shared {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        let cell = std::cell::OnceCell::new();
        let _ = cell.set(locals);
        Box::pin(TASK_LOCALS.scope(cell, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        TASK_LOCALS
            .try_with(|c| c.get().cloned())
            .unwrap_or_default()
    }
}

/// The Rust call of an asyncio method, not started yet: the coroutine
/// (`latchkey._aio.Call`) calls it when it first runs, and awaits the
/// asyncio future it returns. Dropped uncalled (a coroutine never
/// awaited), the Rust future is dropped unpolled: it sent nothing.
#[pyclass(module = "latchkey._native", frozen)]
struct Start(Mutex<Option<Starter>>);

type Starter = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

#[pymethods]
impl Start {
    fn __call__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let starter = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        match starter {
            Some(start) => start(py),
            None => Err(errors::closed("a latchkey coroutine was started twice")),
        }
    }
}

/// `fut` as the asyncio future it runs under, started now on the runtime:
/// cancelling that future (asyncio.timeout, a task's cancel, the loop's
/// shutdown) drops the Rust future, which the library makes safe.
fn started<F, T>(py: Python<'_>, fut: F) -> PyResult<Bound<'_, PyAny>>
where
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    // Made now, in the caller's process: a fork between here and the spawn
    // is not a case to handle.
    handle()?;
    let (fut, cancel) = tracked(fut);
    let py_fut = pyo3_async_runtimes::generic::future_into_py::<Shared, _, T>(py, async move {
        fut.await
            .map_err(|e| Python::attach(|py| errors::to_py(py, e)))
    })?;
    py_fut.call_method1("add_done_callback", (OnDone(cancel),))?;
    Ok(py_fut)
}

/// `fut` as the coroutine an asyncio method returns (see `Start`);
/// `qualname` (`AsyncLock.acquire`) names it in Python's warnings.
pub(crate) fn awaitable<'py, F, T>(
    py: Python<'py>,
    qualname: &str,
    fut: F,
) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    coroutine(py, qualname, fut, false)
}

/// `after_a_turn`: the loop runs one turn before the call starts (a
/// flush: the done-callbacks of a future cancelled just now, which start
/// its Rust side's cleanup, run then).
pub(crate) fn coroutine<'py, F, T>(
    py: Python<'py>,
    qualname: &str,
    fut: F,
    turn_first: bool,
) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    static CALL: pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>> = pyo3::sync::PyOnceLock::new();
    let start: Starter = Box::new(move |py| Ok(started(py, fut)?.unbind()));
    let start = Start(Mutex::new(Some(start)));
    CALL.import(py, "latchkey._aio", "Call")?
        .call1((start, qualname, turn_first))
}
