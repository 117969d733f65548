//! latchkey for Python: the extension module `latchkey._native`, which the
//! package `latchkey` (python/latchkey/) re-exports with its exceptions.
//!
//! One tokio runtime per process (runtime.rs) runs every Rust future; a
//! blocking call waits on it without the GIL, an asyncio call gets a Python
//! future over it. Every call into the Rust API of a primitive is in that
//! primitive's file (lock.rs, semaphore.rs, rwlock.rs, latch.rs, barrier.rs,
//! election.rs, signal.rs, fence.rs); the lock's Python classes are in
//! lock_py.rs, the other holds' in hold.rs; the clients' in client_py.rs
//! and redlock_py.rs.

use pyo3::prelude::*;

mod args;
mod barrier;
mod client_py;
mod core;
mod election;
mod errors;
mod exit;
mod factories;
mod fence;
mod hold;
mod latch;
mod listen;
mod lock;
mod lock_py;
mod lost;
mod redlock_py;
mod runtime;
mod rwlock;
mod semaphore;
mod signal;

/// Gives every hold back and stops the runtime, at interpreter exit
/// (python/latchkey/__init__.py registers it with `atexit`; see exit.rs).
#[pyfunction]
fn _at_exit(py: Python<'_>) {
    exit::at_exit(py);
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client_py::Client>()?;
    m.add_class::<client_py::AsyncClient>()?;
    m.add_class::<redlock_py::Redlock>()?;
    m.add_class::<redlock_py::AsyncRedlock>()?;
    m.add_class::<lock_py::Lock>()?;
    m.add_class::<lock_py::AsyncLock>()?;
    m.add_class::<lock_py::LockGuard>()?;
    m.add_class::<lock_py::AsyncLockGuard>()?;
    m.add_class::<lost::LostEvent>()?;
    m.add_class::<lost::AsyncLostEvent>()?;
    m.add_class::<hold::Permit>()?;
    m.add_class::<semaphore::Semaphore>()?;
    m.add_class::<semaphore::PermitHolder>()?;
    m.add_class::<rwlock::RwLock>()?;
    m.add_class::<latch::Latch>()?;
    m.add_class::<barrier::Barrier>()?;
    m.add_class::<election::Election>()?;
    m.add_class::<election::LeadershipHold>()?;
    m.add_class::<election::LeaderInfo>()?;
    m.add_class::<election::Observer>()?;
    m.add_class::<signal::Signal>()?;
    m.add_class::<listen::Listener>()?;
    m.add_class::<fence::FencedResource>()?;
    m.add_function(wrap_pyfunction!(_at_exit, m)?)?;
    m.add("ERROR_CLASSES", errors::CLASS_NAMES.to_vec())?;
    m.add("MIN_TTL", latchkey::MIN_TTL.as_secs_f64())?;
    m.add("MAX_TTL", latchkey::MAX_TTL.as_secs_f64())?;
    m.add("MAX_NAME_LEN", latchkey::MAX_NAME_LEN)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
