//! A hold of any primitive but the lock (a semaphore's permit, a read or
//! write hold, a leadership): what every one of them offers, behind one
//! trait that each primitive's file implements with its Rust calls, and the
//! Python class `Permit` over it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use latchkey::LostSignal;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use tokio::sync::RwLock;

use crate::lost::{AsyncLostEvent, LostEvent};
use crate::runtime::{drop_in_runtime, pid, run};

pub(crate) type Answer<'a, T> = Pin<Box<dyn Future<Output = latchkey::Result<T>> + Send + 'a>>;

/// What a primitive's hold does, in its Rust calls.
pub(crate) trait Hold: Send + Sync + 'static {
    fn name(&self) -> &[u8];
    fn token(&self) -> &str;
    fn fencing_token(&self) -> Option<u64>;
    fn deadline(&self) -> Instant;
    fn is_held(&self) -> bool;
    fn lost_signal(&self) -> LostSignal;
    /// Releases (resigns): whether it was ours to the end.
    fn release(self: Box<Self>) -> Answer<'static, bool>;
    /// A leadership's value now; None for other holds.
    fn value(&self) -> Option<Vec<u8>> {
        None
    }
    /// A leadership's new value: whether it was still ours.
    fn proclaim(&self, _value: Vec<u8>) -> Answer<'_, bool> {
        Box::pin(async { Err(latchkey::Error::Unsupported("proclaim: not a leadership")) })
    }
    /// Resets the hold's TTL to `ttl` from now: whether it was still ours.
    fn extend(&self, ttl: std::time::Duration) -> Answer<'_, bool>;
}

/// `impl Hold` for a guard of the Rust library: every guard there has the
/// same surface (one lease under all of them), so one body serves each;
/// `$extra`: what only that guard adds (a leadership's value).
macro_rules! hold_surface {
    ($guard:ty $(, { $($extra:tt)* })?) => {
        impl $crate::hold::Hold for $guard {
            fn name(&self) -> &[u8] {
                <$guard>::name(self)
            }
            fn token(&self) -> &str {
                <$guard>::token(self)
            }
            fn fencing_token(&self) -> Option<u64> {
                <$guard>::issued_fencing_token(self)
            }
            fn deadline(&self) -> std::time::Instant {
                <$guard>::deadline(self)
            }
            fn is_held(&self) -> bool {
                <$guard>::is_held(self)
            }
            fn lost_signal(&self) -> latchkey::LostSignal {
                <$guard>::lost_signal(self)
            }
            fn release(self: Box<Self>) -> $crate::hold::Answer<'static, bool> {
                Box::pin(async move { Ok((*self).release().await? == latchkey::Ownership::Owned) })
            }
            fn extend(&self, ttl: std::time::Duration) -> $crate::hold::Answer<'_, bool> {
                Box::pin(async move { Ok(<$guard>::extend(self, ttl).await? == latchkey::Ownership::Owned) })
            }
            $($($extra)*)?
        }
    };
}
pub(crate) use hold_surface;

/// A hold shared by its Python object and the calls in flight on it.
pub(crate) struct Holding {
    /// `None` once released.
    pub(crate) hold: RwLock<Option<Box<dyn Hold>>>,
    pub(crate) name: Vec<u8>,
    pub(crate) token: String,
    pub(crate) fencing_token: Option<u64>,
    pub(crate) lost: LostSignal,
    /// The process that holds it (a forked child does nothing with it).
    pub(crate) owner: u32,
    /// The client it was taken with, kept until the hold is gone (see
    /// `lock::Held`).
    _client: Arc<crate::core::Core>,
}

impl Holding {
    /// Made on the runtime (the lost signal may start a task).
    pub(crate) fn new(hold: Box<dyn Hold>, client: &Arc<crate::core::Core>) -> Arc<Holding> {
        let holding = Arc::new(Holding {
            name: hold.name().to_vec(),
            token: hold.token().to_owned(),
            fencing_token: hold.fencing_token(),
            lost: hold.lost_signal(),
            hold: RwLock::new(Some(hold)),
            owner: pid(),
            _client: client.clone(),
        });
        crate::exit::register(&holding);
        holding
    }

    pub(crate) fn check_owner(&self) -> latchkey::Result<()> {
        if self.owner == pid() {
            return Ok(());
        }
        Err(latchkey::Error::NotHeld {
            name: format!(
                "{} (held by the parent process {}: a hold does not cross os.fork())",
                String::from_utf8_lossy(&self.name),
                self.owner
            ),
        })
    }

    pub(crate) async fn release(self: Arc<Self>) -> latchkey::Result<bool> {
        if self.owner != pid() {
            return Ok(false);
        }
        let taken = self.hold.write().await.take();
        match taken {
            Some(hold) => hold.release().await,
            None => Ok(false),
        }
    }

    pub(crate) async fn extend(
        self: Arc<Self>,
        ttl: std::time::Duration,
    ) -> latchkey::Result<bool> {
        self.check_owner()?;
        let held = self.hold.read().await;
        match &*held {
            Some(hold) => hold.extend(ttl).await,
            None => Ok(false),
        }
    }

    pub(crate) async fn proclaim(self: Arc<Self>, value: Vec<u8>) -> latchkey::Result<bool> {
        self.check_owner()?;
        let held = self.hold.read().await;
        match &*held {
            Some(hold) => hold.proclaim(value).await,
            None => Ok(false),
        }
    }

    /// A leadership's value now (None once resigned).
    pub(crate) fn value(&self) -> Option<Vec<u8>> {
        self.hold.try_read().ok()?.as_ref()?.value()
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        if self.owner != pid() {
            return None;
        }
        self.hold.try_read().ok()?.as_ref().map(|h| h.deadline())
    }

    pub(crate) fn is_held(&self) -> bool {
        self.owner == pid()
            && self
                .hold
                .try_read()
                .is_ok_and(|h| h.as_ref().is_some_and(|h| h.is_held()))
    }

    /// The lost event, blocking or awaitable.
    pub(crate) fn lost_event(&self, py: Python<'_>, asyncio: bool) -> PyResult<Py<PyAny>> {
        let (lost, owner) = (self.lost.clone(), self.owner);
        Ok(match asyncio {
            true => Py::new(py, AsyncLostEvent { lost, owner })?.into_any(),
            false => Py::new(py, LostEvent { lost, owner })?.into_any(),
        })
    }
}

impl crate::exit::Releasable for Holding {
    fn release_at_exit(self: Arc<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let _ = self.release().await;
        })
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        if let Some(hold) = self.hold.try_write().ok().and_then(|mut h| h.take()) {
            drop_in_runtime(hold, self.owner);
        }
    }
}

/// A semaphore's permit, or a read-write lock's read or write hold. A
/// context manager (`with`, or `async with` from an `AsyncClient`) that
/// releases on exit; released in the background when garbage-collected.
#[pyclass(module = "latchkey._native", frozen, weakref)]
pub(crate) struct Permit {
    pub(crate) holding: Arc<Holding>,
    pub(crate) asyncio: bool,
}

#[pymethods]
impl Permit {
    /// Releases if still ours: True when it was ours to the end (idempotent).
    fn release(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        run(
            py,
            self.asyncio,
            "Permit.release",
            self.holding.clone().release(),
        )
    }

    /// Resets the hold's TTL to `ttl` seconds from now: True if still ours.
    fn extend(&self, py: Python<'_>, ttl: f64) -> PyResult<Py<PyAny>> {
        let ttl = crate::args::ttl(py, ttl)?;
        run(
            py,
            self.asyncio,
            "Permit.extend",
            self.holding.clone().extend(ttl),
        )
    }

    /// The fencing token issued with the hold (made with `fencing=True`), else None.
    fn fencing_token(&self) -> Option<u64> {
        self.holding.fencing_token
    }

    #[getter]
    fn token(&self) -> String {
        self.holding.token.clone()
    }

    #[getter]
    fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.holding.name)
    }

    #[getter]
    fn deadline(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.holding
            .deadline()
            .map(|at| crate::lock_py::monotonic(py, at))
            .transpose()
    }

    fn is_held(&self) -> bool {
        self.holding.is_held()
    }

    #[getter]
    fn lost(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.holding.lost_event(py, self.asyncio)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        crate::runtime::block_on(py, self.holding.clone().release())?;
        Ok(false)
    }

    fn __aenter__<'py>(slf: Py<Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::runtime::awaitable(py, "Permit.__aenter__", async move { Ok(slf) })
    }

    #[pyo3(signature = (*_exc))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc: &Bound<'_, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let releasing = self.holding.clone().release();
        crate::runtime::awaitable(py, "Permit.__aexit__", async move {
            releasing.await?;
            Ok(false)
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<latchkey.Permit name={:?} held={}>",
            String::from_utf8_lossy(&self.holding.name),
            self.holding.is_held()
        )
    }
}
