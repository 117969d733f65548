//! An asyncio call: a coroutine (`latchkey._aio.Call`) that starts the
//! Rust future on the runtime when it first runs, and an asyncio future
//! for its result, set on the loop's thread by `Deliver` (this crate's own
//! bridge: its runtime can be rebuilt in a forked child, and a result
//! whose loop was closed, or whose future was cancelled, is never made
//! into a Python object: a hold taken then is given back, not kept).

use std::future::Future;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use tokio::sync::Notify;

use super::blocking::{tracked, Cancel};
use super::handle;
use crate::errors;

/// The done-callback of an awaitable: a cancelled Python future marks its
/// Rust future cancelled and stops it (dropped on the runtime, which the
/// library makes safe).
#[pyclass(module = "latchkey._native", frozen)]
struct OnDone(Cancel, Arc<Notify>);

#[pymethods]
impl OnDone {
    fn __call__(&self, fut: &Bound<'_, PyAny>) -> PyResult<()> {
        if fut.call_method0("cancelled")?.extract::<bool>()? {
            self.0.mark();
            self.1.notify_one();
        }
        Ok(())
    }
}

/// The result of a call, made into its Python object on the loop's thread
/// just before it is set, and only if the future still wants it.
type Result = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

#[pyclass(module = "latchkey._native", frozen)]
struct Deliver(Mutex<Option<Result>>);

#[pymethods]
impl Deliver {
    fn __call__(&self, py: Python<'_>, fut: &Bound<'_, PyAny>) -> PyResult<()> {
        let Some(result) = self.0.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return Ok(());
        };
        if fut.call_method0("done")?.extract::<bool>()? {
            return Ok(()); // cancelled meanwhile: dropped unmade
        }
        match result(py) {
            Ok(value) => fut.call_method1("set_result", (value,))?,
            Err(e) => fut.call_method1("set_exception", (e.into_value(py),))?,
        };
        Ok(())
    }
}

/// Hands `result` to the loop's thread; when the loop is closed (an
/// orphaned call: `loop.close()` with the task pending) or the future
/// done, `result` is dropped unmade (what its Rust side took goes back).
fn deliver(py: Python<'_>, event_loop: Py<PyAny>, py_fut: Py<PyAny>, result: Result) {
    let (event_loop, py_fut) = (event_loop.bind(py), py_fut.bind(py));
    let closed = event_loop
        .call_method0("is_closed")
        .and_then(|c| c.extract::<bool>())
        .unwrap_or(true);
    if closed {
        // Cancelled, so that nothing waits on it (asyncio raises that the
        // loop is closed, after marking it).
        let _ = py_fut.call_method0("cancel");
        return;
    }
    let deliver = Deliver(Mutex::new(Some(result)));
    // Closed between the look and here: dropped with `deliver`.
    let _ = event_loop.call_method1("call_soon_threadsafe", (deliver, py_fut));
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
    static GET_LOOP: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let event_loop = GET_LOOP
        .import(py, "asyncio", "get_running_loop")?
        .call0()?;
    let py_fut = event_loop.call_method0("create_future")?;
    let Ok(handle) = handle() else {
        // The interpreter is exiting: pending, as any task of a runtime
        // that is gone.
        return Ok(py_fut);
    };
    let (fut, cancel) = tracked(fut);
    let stop = Arc::new(Notify::new());
    py_fut.call_method1("add_done_callback", (OnDone(cancel, stop.clone()),))?;
    let (event_loop, waiting) = (event_loop.unbind(), py_fut.clone().unbind());
    let entered = super::orphans::enter(&handle, event_loop.clone_ref(py), stop.clone());
    handle.spawn(async move {
        let result = tokio::select! {
            biased;
            _ = stop.notified() => return, // cancelled, or its loop closed
            result = fut => result,
        };
        drop(entered);
        let result: Result = Box::new(move |py| match result {
            Ok(value) => pyo3::IntoPyObjectExt::into_py_any(value, py),
            Err(e) => Err(errors::to_py(py, e)),
        });
        // The GIL is not taken on the runtime's worker: a task waiting
        // for it there would hold up every other.
        tokio::task::spawn_blocking(move || {
            Python::attach(|py| deliver(py, event_loop, waiting, result));
        });
    });
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
