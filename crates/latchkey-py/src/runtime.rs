//! The tokio runtime every client of this process shares, rebuilt after a
//! fork, and the two ways Python waits on it: blocking (in slices, so that
//! Ctrl-C gets through) and asyncio (through pyo3-async-runtimes' generic
//! bridge, driven on this runtime rather than on its own global one, which
//! could not be rebuilt in a forked child).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use pyo3_async_runtimes::TaskLocals;
use tokio::runtime::{Handle, Runtime};

use crate::errors;

/// How long a blocking wait sleeps between two looks at Python's signal
/// flags: Ctrl-C interrupts a wait within this (plus the handler's time).
const SLICE: Duration = Duration::from_millis(50);

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

/// A handle on this process's runtime, made on first use and again after a
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("latchkey")
        .enable_all()
        .build()
        .map_err(|e| errors::closed(&format!("cannot start latchkey's runtime: {e}")))?;
    let handle = runtime.handle().clone();
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

/// Calls cancelled from Python (Ctrl-C, an asyncio cancel) whose Rust
/// future is not dropped yet: dropping it starts the library's cleanup (a
/// lock it took released, a queue entry left), which `flush` then waits for.
static CANCELLED_LIVE: AtomicUsize = AtomicUsize::new(0);

const RUNNING: u8 = 0;
const CANCELLED: u8 = 1;
const DROPPED: u8 = 2;

/// Marks one call cancelled (counted until its future is dropped).
#[derive(Clone)]
pub(crate) struct Cancel(Arc<AtomicU8>);

impl Cancel {
    pub(crate) fn mark(&self) {
        let changed =
            self.0
                .compare_exchange(RUNNING, CANCELLED, Ordering::AcqRel, Ordering::Acquire);
        if changed.is_ok() {
            CANCELLED_LIVE.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Dropped with the future it is part of, after the future's own parts.
struct DropMark(Arc<AtomicU8>);

impl Drop for DropMark {
    fn drop(&mut self) {
        if self.0.swap(DROPPED, Ordering::AcqRel) == CANCELLED {
            CANCELLED_LIVE.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// `fut`, and the handle that marks it cancelled.
fn tracked<F: Future>(fut: F) -> (impl Future<Output = F::Output>, Cancel) {
    let flag = Arc::new(AtomicU8::new(RUNNING));
    let mark = DropMark(flag.clone());
    let tracked = async move {
        // Declared first, so dropped last: after `fut`'s cleanup started.
        let _mark = mark;
        let fut = fut;
        fut.await
    };
    (tracked, Cancel(flag))
}

/// Waits, at most until `deadline`, until every cancelled call's future is
/// dropped (its cleanup spawned); whether they all were.
pub(crate) async fn cancelled_dropped(deadline: Instant) -> bool {
    while CANCELLED_LIVE.load(Ordering::Acquire) > 0 {
        if Instant::now() >= deadline {
            return false;
        }
        // The drop is a moment away (the runtime's next poll of the task).
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    true
}

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

/// Runs `fut` on the runtime and waits for it without the GIL, looking at
/// Python's signals every `SLICE`: a pending KeyboardInterrupt (or any
/// exception a signal handler raises) drops the future, which the Rust
/// library makes safe (a lock it may have taken is released in the
/// background), and is raised here.
pub(crate) fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let handle = handle()?;
    let (fut, cancel) = tracked(fut);
    // Polled on this thread (`Handle::block_on`: the runtime's workers
    // drive the sockets and timers): the answer wakes this thread itself,
    // with no task to spawn and no channel to hand the result over, which
    // was a third of an uncontended acquire + release from Python.
    let mut fut = Box::pin(fut);
    loop {
        let on = handle.clone();
        let (back, got) = py.detach(move || {
            let got = on.block_on(async { tokio::time::timeout(SLICE, fut.as_mut()).await });
            (fut, got)
        });
        fut = back;
        match got {
            Ok(result) => return result.map_err(|e| errors::to_py(py, e)),
            Err(_) => {
                if let Err(interrupted) = py.check_signals() {
                    // Dropped in the runtime's context, so that its cleanup
                    // (a lock it may have taken, released in the background)
                    // can start.
                    let _entered = handle.enter();
                    cancel.mark();
                    drop(fut);
                    return Err(interrupted);
                }
            }
        }
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
    static CALL: pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>> = pyo3::sync::PyOnceLock::new();
    let start: Starter = Box::new(move |py| Ok(started(py, fut)?.unbind()));
    let start = Start(Mutex::new(Some(start)));
    CALL.import(py, "latchkey._aio", "Call")?
        .call1((start, qualname))
}

/// `fut` run the way the caller's client runs things: awaited in the
/// blocking way (its value), or as an asyncio coroutine (`qualname`
/// without its `Async` prefix: `Semaphore.acquire`).
pub(crate) fn run<F, T>(
    py: Python<'_>,
    asyncio: bool,
    qualname: &str,
    fut: F,
) -> PyResult<Py<PyAny>>
where
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    if asyncio {
        Ok(awaitable(py, &format!("Async{qualname}"), fut)?.unbind())
    } else {
        block_on(py, fut)?.into_py_any(py)
    }
}
