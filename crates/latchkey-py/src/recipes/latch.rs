//! A count-down latch kept in Redis: `Latch`/`AsyncLatch`.

use pyo3::prelude::*;

use super::recipe_class;
use crate::args::{self};
use crate::runtime::run;

recipe_class! {
    /// A count-down latch: a late waiter returns at once.
    LatchBase("_Latch") of latchkey::Latch => Latch, AsyncLatch;
    shows {}
    keeps {}
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
}
