//! A blocking call under gevent's monkey-patching: the thread is the hub's,
//! shared by every greenlet, and parking it (as blocking.rs does) would
//! stop them all, the one that holds the lock a waiter wants included. The
//! Rust future runs as a task of the runtime instead, and the calling
//! greenlet waits on a gevent async watcher (python/latchkey/_green.py),
//! which the task sends when done: the hub runs the other greenlets
//! meanwhile, and no thread of gevent's pool is taken (a pool's few
//! threads, all waiting, would deadlock with the holder's release).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use super::blocking::tracked;
use super::handle;
use crate::errors;

/// Once seen patched, a process stays patched.
static PATCHED: AtomicBool = AtomicBool::new(false);

/// Whether gevent has monkey-patched `threading` in this process (asked of
/// `gevent.monkey` only once it is imported: a dictionary look-up else).
pub(crate) fn patched(py: Python<'_>) -> bool {
    if PATCHED.load(Ordering::Relaxed) {
        return true;
    }
    // `sys.modules` itself, looked up once: this runs before every call.
    static MODULES: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let Ok(modules) = MODULES.get_or_try_init(py, || {
        py.import("sys")
            .and_then(|sys| sys.getattr("modules"))
            .map(Bound::unbind)
    }) else {
        return false;
    };
    let Ok(Some(monkey)) = modules
        .bind(py)
        .call_method1("get", ("gevent.monkey",))
        .map(|m| (!m.is_none()).then_some(m))
    else {
        return false;
    };
    let patched = monkey
        .call_method1("is_module_patched", ("threading",))
        .and_then(|p| p.extract::<bool>())
        .unwrap_or(false);
    PATCHED.store(patched, Ordering::Relaxed);
    patched
}

type Begin = Box<dyn FnOnce(Py<PyAny>) + Send>;

/// Starts the call, given the watcher's `send` (see `_green.wait`).
#[pyclass(module = "latchkey._native", frozen)]
struct Start(Mutex<Option<Begin>>);

#[pymethods]
impl Start {
    fn __call__(&self, send: Py<PyAny>) {
        if let Some(start) = self.0.lock().unwrap_or_else(|p| p.into_inner()).take() {
            start(send);
        }
    }
}

/// `fut`, waited for by the calling greenlet (see the module docs). A
/// greenlet killed meanwhile (`gevent.Timeout`, `kill()`, Ctrl-C) drops
/// the future, which the library makes safe.
pub(crate) fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    static WAIT: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let wait = WAIT.import(py, "latchkey._green", "wait")?;
    let handle = handle()?;
    let (fut, cancel) = tracked(fut);
    let slot: Arc<Mutex<Option<latchkey::Result<T>>>> = Arc::new(Mutex::new(None));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let into = slot.clone();
    let start: Begin = Box::new(move |send| {
        handle.spawn(async move {
            tokio::select! {
                biased;
                _ = stopped => return, // dropped here
                result = fut => *into.lock().unwrap_or_else(|p| p.into_inner()) = Some(result),
            }
            // Not on the runtime's worker: the GIL may be a while coming.
            tokio::task::spawn_blocking(move || {
                Python::attach(|py| {
                    let _ = send.call0(py);
                })
            });
        });
    });
    let waited = wait.call1((Start(Mutex::new(Some(start))),));
    let result = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    match (waited, result) {
        (Ok(_), Some(result)) => result.map_err(|e| errors::to_py(py, e)),
        (Ok(_), None) => Err(errors::closed("a gevent wait woke without a result")),
        (Err(interrupted), result) => {
            cancel.mark();
            let _ = stop.send(());
            // A hold taken just as the greenlet was killed goes back.
            if let Ok(handle) = super::handle() {
                let _entered = handle.enter();
                drop(result);
            }
            Err(interrupted)
        }
    }
}
