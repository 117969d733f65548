//! The lock's Python classes: `Lock` and `LockGuard` (blocking), `AsyncLock`
//! and `AsyncLockGuard` (asyncio), over the calls of lock.rs.

use std::sync::Arc;
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args;
use crate::lock::{Held, LockSpec};
use crate::lost::{AsyncLostEvent, LostEvent};
use crate::runtime::{awaitable, block_on};

/// `at` on Python's `time.monotonic()` clock (the same CLOCK_MONOTONIC as
/// Rust's `Instant` on Linux, read through Python to be sure).
pub(crate) fn monotonic(py: Python<'_>, at: Instant) -> PyResult<f64> {
    let now_py: f64 = py.import("time")?.call_method0("monotonic")?.extract()?;
    let now = Instant::now();
    let ahead = match at.checked_duration_since(now) {
        Some(ahead) => ahead.as_secs_f64(),
        None => -now.duration_since(at).as_secs_f64(),
    };
    Ok(now_py + ahead)
}

/// A lock of a `Client`; `acquire` and `try_acquire` give a `LockGuard`.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct Lock {
    pub(crate) spec: Arc<LockSpec>,
}

/// A lock of an `AsyncClient`: the same methods, as coroutines.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct AsyncLock {
    pub(crate) spec: Arc<LockSpec>,
}

/// A held lock (blocking API). A context manager that releases on exit;
/// released in the background when garbage-collected unreleased.
#[pyclass(module = "latchkey._native", frozen, weakref)]
pub(crate) struct LockGuard {
    held: Arc<Held>,
}

/// A held lock (asyncio API): `async with` releases on exit.
#[pyclass(module = "latchkey._native", frozen, weakref)]
pub(crate) struct AsyncLockGuard {
    held: Arc<Held>,
}

fn describe(spec: &LockSpec, class: &str) -> String {
    format!(
        "<latchkey.{class} name={:?} ttl={}>",
        String::from_utf8_lossy(&spec.name),
        spec.ttl.as_secs_f64()
    )
}

#[pymethods]
impl Lock {
    /// Waits until the lock is ours, at most `timeout` seconds (None: as
    /// long as it takes); raises `WaitTimedOut` when it stays busy.
    #[pyo3(signature = (timeout = None))]
    fn acquire(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<LockGuard> {
        let wait = args::wait(py, timeout)?;
        let held = block_on(py, self.spec.clone().acquire(wait))?;
        Ok(LockGuard { held })
    }

    /// One try: a guard, or None when someone else holds the lock.
    fn try_acquire(&self, py: Python<'_>) -> PyResult<Option<LockGuard>> {
        let held = block_on(py, self.spec.clone().try_acquire())?;
        Ok(held.map(|held| LockGuard { held }))
    }

    #[getter]
    fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.spec.name)
    }

    #[getter]
    fn ttl(&self) -> f64 {
        self.spec.ttl.as_secs_f64()
    }

    fn __repr__(&self) -> String {
        describe(&self.spec, "Lock")
    }
}

#[pymethods]
impl AsyncLock {
    /// As `Lock.acquire`, a coroutine; cancelling it leaves no lock.
    #[pyo3(signature = (timeout = None))]
    fn acquire<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        let wait = args::wait(py, timeout)?;
        let acquiring = self.spec.clone().acquire(wait);
        awaitable(py, "AsyncLock.acquire", async move {
            let held = acquiring.await?;
            Ok(AsyncLockGuard { held })
        })
    }

    /// As `Lock.try_acquire`, a coroutine.
    fn try_acquire<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let trying = self.spec.clone().try_acquire();
        awaitable(py, "AsyncLock.try_acquire", async move {
            let held = trying.await?;
            Ok(held.map(|held| AsyncLockGuard { held }))
        })
    }

    #[getter]
    fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.spec.name)
    }

    #[getter]
    fn ttl(&self) -> f64 {
        self.spec.ttl.as_secs_f64()
    }

    fn __repr__(&self) -> String {
        describe(&self.spec, "AsyncLock")
    }
}

/// What both guards answer without Redis.
macro_rules! guard_methods {
    ($class:ident, $lost:ident, { $($methods:tt)* }) => {
        #[pymethods]
        impl $class {
            $($methods)*

            /// The owner token: the value the lock key holds while ours.
            #[getter]
            fn token(&self) -> String {
                self.held.token.clone()
            }

            /// The lock's name.
            #[getter]
            fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
                PyBytes::new(py, &self.held.name)
            }

            /// Until when the hold may be assumed, on `time.monotonic()`'s
            /// clock; None once released.
            #[getter]
            fn deadline(&self, py: Python<'_>) -> PyResult<Option<f64>> {
                self.held.deadline().map(|at| monotonic(py, at)).transpose()
            }

            /// Not known lost, not released, before the deadline. Asks nobody.
            fn is_held(&self) -> bool {
                self.held.is_held()
            }

            /// Set when the hold can no longer be proven ours.
            #[getter]
            fn lost(&self) -> $lost {
                $lost {
                    lost: self.held.lost_signal(),
                    owner: self.held.owner,
                }
            }

            fn __repr__(&self) -> String {
                format!(
                    "<latchkey.{} name={:?} held={}>",
                    stringify!($class),
                    String::from_utf8_lossy(&self.held.name),
                    self.held.is_held()
                )
            }
        }
    };
}

impl LockGuard {
    fn blocking_release(&self, py: Python<'_>) -> PyResult<bool> {
        block_on(py, self.held.release())
    }
}

guard_methods!(LockGuard, LostEvent, {
    /// Releases if still ours: True when it was ours to the end, False
    /// when it was lost or released already (idempotent).
    fn release(&self, py: Python<'_>) -> PyResult<bool> {
        self.blocking_release(py)
    }

    /// Resets the TTL to `ttl` seconds from now: True if still ours (else
    /// the guard is marked lost).
    fn extend(&self, py: Python<'_>, ttl: f64) -> PyResult<bool> {
        let ttl = args::ttl(py, ttl)?;
        block_on(py, self.held.extend(ttl))
    }

    /// The hold's fencing token: greater than every earlier hold's.
    fn fencing_token(&self, py: Python<'_>) -> PyResult<u64> {
        block_on(py, self.held.fencing_token())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.blocking_release(py)?;
        Ok(false)
    }
});

guard_methods!(AsyncLockGuard, AsyncLostEvent, {
    /// As `LockGuard.release`, a coroutine.
    fn release<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, "AsyncLockGuard.release", self.held.release())
    }

    /// As `LockGuard.extend`, a coroutine.
    fn extend<'py>(&self, py: Python<'py>, ttl: f64) -> PyResult<Bound<'py, PyAny>> {
        let ttl = args::ttl(py, ttl)?;
        awaitable(py, "AsyncLockGuard.extend", self.held.extend(ttl))
    }

    /// As `LockGuard.fencing_token`, a coroutine.
    fn fencing_token<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(
            py,
            "AsyncLockGuard.fencing_token",
            self.held.fencing_token(),
        )
    }

    fn __aenter__<'py>(slf: Py<Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, "AsyncLockGuard.__aenter__", async move { Ok(slf) })
    }

    #[pyo3(signature = (*_exc))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let releasing = self.held.release();
        awaitable(py, "AsyncLockGuard.__aexit__", async move {
            releasing.await?;
            Ok(false)
        })
    }
});
