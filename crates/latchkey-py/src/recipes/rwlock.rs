//! A phase-fair read-write lock: `RwLock`/`AsyncRwLock`; its read and
//! write holds are `Permit`/`AsyncPermit`.

use latchkey::RwAccess;
use pyo3::prelude::*;

use super::recipe_class;
use crate::args::{self};
use crate::holds::kinds::{made, Kind};
use crate::holds::Taken;
use crate::runtime::run;

recipe_class! {
    /// Many readers or one writer, phase-fair.
    RwLockBase("_RwLock") of latchkey::RwLock => RwLock, AsyncRwLock;
    shows {}
    keeps {}
}

impl RwLockBase {
    fn hold(
        &self,
        py: Python<'_>,
        access: RwAccess,
        timeout: Option<f64>,
        once: bool,
    ) -> PyResult<Py<PyAny>> {
        let until = args::deadline(args::wait(py, timeout)?);
        let (recipe, name, mode) = (self.recipe.clone(), self.name.clone(), self.mode);
        let qualname = match (access, once) {
            (RwAccess::Read, false) => "RwLock.read",
            (RwAccess::Write, false) => "RwLock.write",
            (RwAccess::Read, true) => "RwLock.try_read",
            (RwAccess::Write, true) => "RwLock.try_write",
        };
        run(py, mode, qualname, async move {
            let core = recipe.core.clone();
            let rwlock = recipe.get().await?;
            let guard = match (once, access) {
                (false, access) => Some(rwlock.acquire_until(access, until).await?),
                (true, RwAccess::Read) => rwlock.try_read().await?,
                (true, RwAccess::Write) => rwlock.try_write().await?,
            };
            Ok(guard.map(|g| made(Taken::of(g, &name, &core), Kind::Permit, mode)))
        })
    }
}

#[pymethods]
impl RwLockBase {
    /// Waits for a read hold, at most `timeout` seconds; raises `WaitTimedOut`.
    #[pyo3(signature = (timeout = None))]
    fn read(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        self.hold(py, RwAccess::Read, timeout, false)
    }

    /// Waits for the write hold, at most `timeout` seconds; raises `WaitTimedOut`.
    #[pyo3(signature = (timeout = None))]
    fn write(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        self.hold(py, RwAccess::Write, timeout, false)
    }

    /// One try for a read hold: a hold, or None.
    fn try_read(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.hold(py, RwAccess::Read, None, true)
    }

    /// One try for the write hold: a hold, or None.
    fn try_write(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.hold(py, RwAccess::Write, None, true)
    }
}
