//! Every call into the Rust API of a read-write lock (`latchkey::RwLock`,
//! `RwGuard`), and its Python class.

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey::{RwAccess, RwGuard};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args;
use crate::core::Core;
use crate::hold::{Holding, Permit};
use crate::runtime::run;

crate::hold::hold_surface!(RwGuard);

pub(crate) struct RwLockSpec {
    pub(crate) core: Arc<Core>,
    pub(crate) name: Vec<u8>,
    pub(crate) ttl: Duration,
    pub(crate) watchdog: bool,
    pub(crate) fencing: bool,
}

impl RwLockSpec {
    pub(crate) fn build(&self, client: &latchkey::Client) -> latchkey::Result<latchkey::RwLock> {
        let mut rwlock = client.rwlock(&self.name, self.ttl)?;
        if self.watchdog {
            rwlock = rwlock.with_watchdog();
        }
        if self.fencing {
            rwlock = rwlock.with_fencing();
        }
        Ok(rwlock)
    }

    async fn rwlock(&self) -> latchkey::Result<latchkey::RwLock> {
        let client = self.core.clone().client().await?;
        self.build(&client)
    }

    async fn hold(
        self: Arc<Self>,
        access: RwAccess,
        deadline: Option<Instant>,
    ) -> latchkey::Result<RwGuard> {
        let rwlock = self.rwlock().await?;
        match (deadline, access) {
            (Some(deadline), access) => rwlock.acquire_until(access, deadline).await,
            (None, RwAccess::Read) => rwlock.read().await,
            (None, RwAccess::Write) => rwlock.write().await,
        }
    }

    async fn try_hold(self: Arc<Self>, access: RwAccess) -> latchkey::Result<Option<RwGuard>> {
        let rwlock = self.rwlock().await?;
        match access {
            RwAccess::Read => rwlock.try_read().await,
            RwAccess::Write => rwlock.try_write().await,
        }
    }
}

/// Many readers or one writer, phase-fair.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct RwLock {
    pub(crate) spec: Arc<RwLockSpec>,
    pub(crate) asyncio: bool,
}

impl RwLock {
    fn wait(&self, py: Python<'_>, access: RwAccess, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let deadline = args::wait(py, timeout)?.map(|w| Instant::now() + w);
        let (spec, asyncio) = (self.spec.clone(), self.asyncio);
        let qualname = match access {
            RwAccess::Read => "RwLock.read",
            RwAccess::Write => "RwLock.write",
        };
        run(py, asyncio, qualname, async move {
            let guard = spec.clone().hold(access, deadline).await?;
            Ok(Permit {
                holding: Holding::new(Box::new(guard), &spec.core),
                asyncio,
            })
        })
    }

    fn try_once(&self, py: Python<'_>, access: RwAccess) -> PyResult<Py<PyAny>> {
        let (spec, asyncio) = (self.spec.clone(), self.asyncio);
        let qualname = match access {
            RwAccess::Read => "RwLock.try_read",
            RwAccess::Write => "RwLock.try_write",
        };
        run(py, asyncio, qualname, async move {
            let guard = spec.clone().try_hold(access).await?;
            Ok(guard.map(|g| Permit {
                holding: Holding::new(Box::new(g), &spec.core),
                asyncio,
            }))
        })
    }
}

#[pymethods]
impl RwLock {
    /// Waits for a read hold, at most `timeout` seconds; raises `WaitTimedOut`.
    #[pyo3(signature = (timeout = None))]
    fn read(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        self.wait(py, RwAccess::Read, timeout)
    }

    /// Waits for the write hold, at most `timeout` seconds; raises `WaitTimedOut`.
    #[pyo3(signature = (timeout = None))]
    fn write(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        self.wait(py, RwAccess::Write, timeout)
    }

    /// One try for a read hold: a hold, or None.
    fn try_read(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.try_once(py, RwAccess::Read)
    }

    /// One try for the write hold: a hold, or None.
    fn try_write(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.try_once(py, RwAccess::Write)
    }

    #[getter]
    fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.spec.name)
    }
}
