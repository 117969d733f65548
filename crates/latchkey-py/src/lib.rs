//! latchkey for Python: the extension module `latchkey._native`, which the
//! package `latchkey` (python/latchkey/) re-exports with its exceptions.
//!
//! By concern: `runtime/` (one tokio runtime per process; every call runs
//! blocking or as an asyncio coroutine, by its object's `Mode`),
//! `clients/` (the client classes, their one construction, the
//! connection per process, the factories), `recipes/` (one file per
//! recipe: lock, semaphore, …), `holds/` (every hold, over the library's
//! `Box<dyn latchkey::Guard>`), `signals/`, `observe/` (the library's events
//! to `logging`, its metrics to `latchkey.metrics()`); `args.rs`, `errors.rs` and `exit.rs`
//! serve them all. Every class has a blocking and an asyncio twin over one
//! base class (`recipes::twins!`).

use pyo3::prelude::*;

mod args;
mod clients;
mod errors;
mod exit;
mod holds;
mod observe;
mod recipes;
mod runtime;
mod signals;

/// Gives every hold back and stops the runtime, at interpreter exit
/// (python/latchkey/__init__.py registers it with `atexit`; see exit.rs).
#[pyfunction]
fn _at_exit(py: Python<'_>) {
    exit::at_exit(py);
}

/// Adds the classes (base classes first, then their twins).
macro_rules! classes {
    ($m:ident: $($class:ty),* $(,)?) => {
        $($m.add_class::<$class>()?;)*
    };
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    observe::install();
    use clients::{AsyncClient, AsyncRedlock, Client, ClientBase, Redlock, RedlockBase};
    use holds::class::Hold;
    use holds::kinds::*;
    use holds::lost::{AsyncLostEvent, LostBase, LostEvent};
    use recipes::barrier::{AsyncBarrier, Barrier, BarrierBase};
    use recipes::election::{
        AsyncElection, AsyncObserver, Election, ElectionBase, LeaderInfo, Observer, ObserverBase,
    };
    use recipes::fence::{AsyncFencedResource, FencedBase, FencedResource};
    use recipes::latch::{AsyncLatch, Latch, LatchBase};
    use recipes::lock::{AsyncLock, AsyncMultiLock, Lock, LockBase, MultiLock};
    use recipes::rwlock::{AsyncRwLock, RwLock, RwLockBase};
    use recipes::semaphore::{AsyncSemaphore, PermitHolder, Semaphore, SemaphoreBase};
    use signals::listen::{AsyncListener, Listener, ListenerBase};
    classes!(m:
        ClientBase, Client, AsyncClient, RedlockBase, Redlock, AsyncRedlock,
        LockBase, Lock, AsyncLock, MultiLock, AsyncMultiLock,
        SemaphoreBase, Semaphore, AsyncSemaphore, PermitHolder,
        RwLockBase, RwLock, AsyncRwLock,
        LatchBase, Latch, AsyncLatch,
        BarrierBase, Barrier, AsyncBarrier,
        ElectionBase, Election, AsyncElection, ObserverBase, Observer, AsyncObserver, LeaderInfo,
        FencedBase, FencedResource, AsyncFencedResource,
        ListenerBase, Listener, AsyncListener, signals::Signal,
        Hold, LockGuard, AsyncLockGuard,
        PermitBase, Permit, AsyncPermit,
        MultiBase, MultiGuard, AsyncMultiGuard,
        LeadingBase, Leadership, AsyncLeadership,
        LostBase, LostEvent, AsyncLostEvent,
        clients::control::Revocation,
    );
    m.add_function(wrap_pyfunction!(_at_exit, m)?)?;
    m.add_function(wrap_pyfunction!(observe::metrics::_metrics_snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(observe::log::_refresh_logging, m)?)?;
    m.add_function(wrap_pyfunction!(observe::log::_log_records_dropped, m)?)?;
    m.add("ERROR_CLASSES", errors::class_names())?;
    m.add("MIN_TTL", latchkey::limits::MIN_TTL.as_secs_f64())?;
    m.add("MAX_TTL", latchkey::limits::MAX_TTL.as_secs_f64())?;
    m.add("MAX_NAME_LEN", latchkey::limits::MAX_NAME_LEN)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
