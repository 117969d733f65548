//! A count-down latch kept in Redis: `Latch`/`AsyncLatch`.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;

use super::{twins, Made};
use crate::args::{self, Name};
use crate::clients::core::Core;
use crate::runtime::{run, Mode};

/// A count-down latch: a late waiter returns at once.
#[pyclass(module = "latchkey._native", name = "_Latch", subclass, frozen)]
pub(crate) struct LatchBase {
    recipe: Arc<Made<latchkey::Latch>>,
    name: Name,
    mode: Mode,
}

twins!(LatchBase => Latch, AsyncLatch; latch_class);

/// `client.latch(name, ttl)`.
pub(crate) fn latch(
    py: Python<'_>,
    core: &Arc<Core>,
    name: Name,
    ttl: Duration,
    mode: Mode,
) -> PyResult<Py<PyAny>> {
    let bytes = name.bytes.clone();
    let recipe = Made::new(py, core, move |c| c.client()?.latch(&bytes, ttl))?;
    latch_class(py, LatchBase { recipe, name, mode }.into(), mode)
}

#[pymethods]
impl LatchBase {
    /// Creates the latch with `count` (True if this call made it).
    fn create(&self, py: Python<'_>, count: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let count = args::count(py, "latch count", count)?;
        let recipe = self.recipe.clone();
        run(py, self.mode, "Latch.create", async move {
            recipe.get().await?.create(count).await
        })
    }

    /// Counts down by one; the count left.
    fn count_down(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let recipe = self.recipe.clone();
        run(py, self.mode, "Latch.count_down", async move {
            recipe.get().await?.count_down().await
        })
    }

    /// The count left (0: open), or None when the latch does not exist.
    fn count(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let recipe = self.recipe.clone();
        run(py, self.mode, "Latch.count", async move {
            recipe.get().await?.count().await
        })
    }

    /// Waits until open, at most `timeout` seconds: True; raises
    /// `WaitTimedOut` when the time ran out.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let until = args::deadline(args::wait(py, timeout)?);
        let recipe = self.recipe.clone();
        run(py, self.mode, "Latch.wait", async move {
            recipe.get().await?.wait_until(until).await?;
            Ok(true)
        })
    }

    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyAny> {
        self.name.to_py(py)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(format!(
            "<latchkey.{} name={}>",
            slf.get_type().name()?,
            slf.get().name.shown()
        ))
    }
}
