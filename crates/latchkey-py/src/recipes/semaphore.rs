//! A counting semaphore: `Semaphore`/`AsyncSemaphore`, permits (one or
//! `k` at once) as `Permit`/`AsyncPermit`, and who holds them.

use pyo3::prelude::*;

use super::lock::take;
use super::recipe_class;
use crate::args::{self};
use crate::holds::kinds::{made, Kind};
use crate::holds::Taken;
use crate::runtime::run;

recipe_class! {
    /// At most `permits` holders at once; each permit is a lease.
    SemaphoreBase("_Semaphore") of latchkey::Semaphore => Semaphore, AsyncSemaphore;
    shows {
        /// How many permits the semaphore has.
        permits: u64,
    }
    keeps {}
}

#[pymethods]
impl SemaphoreBase {
    /// Waits for a permit, at most `timeout` seconds (None: as long as it
    /// takes); raises `WaitTimedOut`.
    #[pyo3(signature = (timeout = None))]
    fn acquire(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let until = Some(args::deadline(args::wait(py, timeout)?));
        take(
            py,
            &self.recipe,
            &self.name,
            (Kind::Permit, self.mode),
            until,
        )
    }

    /// One try: a permit, or None when all are taken.
    fn try_acquire(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        take(
            py,
            &self.recipe,
            &self.name,
            (Kind::Permit, self.mode),
            None,
        )
    }

    /// Waits for `k` permits at once (all or none), at most `timeout`
    /// seconds; raises `WaitTimedOut`. One hold of `k` permits.
    #[pyo3(signature = (k, timeout = None))]
    fn acquire_many(
        &self,
        py: Python<'_>,
        k: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let k = permits_asked(py, k)?;
        let until = args::deadline(args::wait(py, timeout)?);
        let (recipe, name, mode) = (self.recipe.clone(), self.name.clone(), self.mode);
        run(py, mode, "Semaphore.acquire_many", async move {
            let core = recipe.core.clone();
            let permit = recipe.get().await?.acquire_many_until(k, until).await?;
            Ok(made(Taken::of(permit, &name, &core), Kind::Permit, mode))
        })
    }

    /// One try for `k` permits at once: a hold of them, or None.
    fn try_acquire_many(&self, py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let k = permits_asked(py, k)?;
        let (recipe, name, mode) = (self.recipe.clone(), self.name.clone(), self.mode);
        run(py, mode, "Semaphore.try_acquire_many", async move {
            let core = recipe.core.clone();
            let permit = recipe.get().await?.try_acquire_many(k).await?;
            Ok(permit.map(|p| made(Taken::of(p, &name, &core), Kind::Permit, mode)))
        })
    }

    /// The permits held now, soonest to expire first: a list of
    /// `PermitHolder` (two round trips; only reads).
    fn holders(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.recipe.run(
            py,
            self.mode,
            "Semaphore.holders",
            move |recipe| async move {
                let holders = recipe.holders().await?;
                Ok(holders.into_iter().map(HolderParts).collect::<Vec<_>>())
            },
        )
    }
}

/// `k` of `acquire_many`: 1 up to the semaphore's permits.
fn permits_asked(py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<u32> {
    let k = args::count(py, "permits asked", k)?;
    u32::try_from(k).map_err(|_| {
        crate::errors::raise(
            py,
            "InvalidCount",
            format!("invalid permits asked {k}: it must be at most {}", u32::MAX),
        )
    })
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
            "<latchkey.PermitHolder token={:?} host={:?} pid={:?} ttl_left={:.3}>",
            self.token, self.host, self.pid, self.ttl_left
        )
    }
}

/// A `PermitHolder` before it meets the GIL.
struct HolderParts(latchkey::inspect::Holding);

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
                ttl_left: self.0.ttl.unwrap_or_default().as_secs_f64(),
            },
        )
    }
}
