//! Every call into the Rust API of a semaphore (`latchkey::Semaphore`,
//! `PermitGuard`), and its Python class.

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey::PermitGuard;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args;
use crate::core::Core;
use crate::hold::{Holding, Permit};
use crate::runtime::run;

crate::hold::hold_surface!(PermitGuard);

pub(crate) struct SemaphoreSpec {
    pub(crate) core: Arc<Core>,
    pub(crate) name: Vec<u8>,
    pub(crate) permits: u64,
    pub(crate) ttl: Duration,
    pub(crate) watchdog: bool,
    pub(crate) fencing: bool,
}

impl SemaphoreSpec {
    pub(crate) fn build(&self, client: &latchkey::Client) -> latchkey::Result<latchkey::Semaphore> {
        let mut semaphore = client.semaphore(&self.name, self.permits, self.ttl)?;
        if self.watchdog {
            semaphore = semaphore.with_watchdog();
        }
        if self.fencing {
            semaphore = semaphore.with_fencing();
        }
        Ok(semaphore)
    }

    async fn semaphore(&self) -> latchkey::Result<latchkey::Semaphore> {
        let client = self.core.clone().client().await?;
        self.build(&client)
    }
}

/// At most `permits` holders at once; each permit is a lease.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct Semaphore {
    pub(crate) spec: Arc<SemaphoreSpec>,
    pub(crate) asyncio: bool,
}

#[pymethods]
impl Semaphore {
    /// Waits for a permit, at most `timeout` seconds (None: as long as it
    /// takes); raises `WaitTimedOut`.
    #[pyo3(signature = (timeout = None))]
    fn acquire(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let deadline = args::wait(py, timeout)?.map(|w| Instant::now() + w);
        let (spec, asyncio) = (self.spec.clone(), self.asyncio);
        run(py, asyncio, "Semaphore.acquire", async move {
            let semaphore = spec.semaphore().await?;
            let permit = match deadline {
                Some(deadline) => semaphore.acquire_until(deadline).await?,
                None => semaphore.acquire().await?,
            };
            Ok(Permit {
                holding: Holding::new(Box::new(permit), &spec.core),
                asyncio,
            })
        })
    }

    /// One try: a permit, or None when all are taken.
    fn try_acquire(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (spec, asyncio) = (self.spec.clone(), self.asyncio);
        run(py, asyncio, "Semaphore.try_acquire", async move {
            let permit = spec.semaphore().await?.try_acquire().await?;
            Ok(permit.map(|p| Permit {
                holding: Holding::new(Box::new(p), &spec.core),
                asyncio,
            }))
        })
    }

    /// The permits held now, soonest to expire first: a list of
    /// `PermitHolder` (two round trips; only reads).
    fn holders(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let spec = self.spec.clone();
        run(py, self.asyncio, "Semaphore.holders", async move {
            let holders = spec.semaphore().await?.holders().await?;
            Ok(holders.into_iter().map(HolderParts).collect::<Vec<_>>())
        })
    }

    #[getter]
    fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.spec.name)
    }

    #[getter]
    fn permits(&self) -> u64 {
        self.spec.permits
    }
}

/// One permit held, as `Semaphore.holders()` reads it: the holder's
/// `token`; `host`, `pid` and `acquired_at` (seconds since the epoch, by
/// the holder's clock) parsed from it, None for a token not made by
/// latchkey; `ttl_left`, seconds until it expires unless renewed.
#[pyclass(module = "latchkey._native", frozen, get_all)]
pub(crate) struct PermitHolder {
    token: String,
    host: Option<String>,
    pid: Option<u32>,
    acquired_at: Option<f64>,
    ttl_left: f64,
}

#[pymethods]
impl PermitHolder {
    fn __repr__(&self) -> String {
        format!(
            "<latchkey.PermitHolder token={:?} ttl_left={:.3}>",
            self.token, self.ttl_left
        )
    }
}

/// A `PermitHolder` before it meets the GIL.
struct HolderParts(latchkey::PermitHolder);

impl<'py> IntoPyObject<'py> for HolderParts {
    type Target = PermitHolder;
    type Output = Bound<'py, PermitHolder>;
    type Error = PyErr;
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        let holder = self.0.holder;
        Bound::new(
            py,
            PermitHolder {
                token: self.0.token,
                host: holder.as_ref().map(|h| h.host.clone()),
                pid: holder.as_ref().map(|h| h.pid),
                acquired_at: holder.as_ref().map(|h| {
                    h.acquired_at
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_secs_f64())
                        .unwrap_or(0.0)
                }),
                ttl_left: self.0.ttl_left.as_secs_f64(),
            },
        )
    }
}
