//! A count-down latch kept in Redis: `Latch`/`AsyncLatch`.

use pyo3::prelude::*;

use super::recipe_class;
use crate::args::{self};

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
        self.recipe
            .run(py, self.mode, "Latch.create", move |recipe| async move {
                recipe.create(count).await
            })
    }

    /// Counts down by one; the count left.
    fn count_down(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.recipe.run(
            py,
            self.mode,
            "Latch.count_down",
            move |recipe| async move { recipe.count_down().await },
        )
    }

    /// The count left (0: open), or None when the latch does not exist.
    fn count(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.recipe
            .run(py, self.mode, "Latch.count", move |recipe| async move {
                recipe.count().await
            })
    }

    /// Waits until open, at most `timeout` seconds: True; raises
    /// `WaitTimedOut` when the time ran out.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let until = args::deadline(args::wait(py, timeout)?);
        self.recipe
            .run(py, self.mode, "Latch.wait", move |recipe| async move {
                recipe.wait_until(until).await?;
                Ok(true)
            })
    }
}
