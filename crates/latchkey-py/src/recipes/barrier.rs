//! A cyclic barrier in Redis: `Barrier`/`AsyncBarrier`.

use pyo3::prelude::*;

use super::recipe_class;
use crate::args::{self};
use crate::runtime::run;

recipe_class! {
    /// `parties` meet, round after round.
    BarrierBase("_Barrier") of latchkey::Barrier => Barrier, AsyncBarrier;
    shows {
        /// How many parties meet.
        parties: u64,
    }
    keeps {}
}

impl BarrierBase {
    fn arrive(&self, py: Python<'_>, timeout: Option<f64>, qualname: &str) -> PyResult<Py<PyAny>> {
        let until = args::deadline(args::wait(py, timeout)?);
        let recipe = self.recipe.clone();
        run(py, self.mode, qualname, async move {
            recipe.get().await?.arrive_and_wait_until(until).await
        })
    }
}

#[pymethods]
impl BarrierBase {
    /// Arrives and waits for the others, at most `timeout` seconds: the
    /// generation released; raises `WaitTimedOut` when the time ran out
    /// (the arrival is taken back).
    #[pyo3(signature = (timeout = None))]
    fn arrive_and_wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        self.arrive(py, timeout, "Barrier.arrive_and_wait")
    }

    /// Deprecated (returns None on timeout): `arrive_and_wait`, which
    /// raises `WaitTimedOut` as every wait does.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        crate::errors::deprecated(py, "Barrier.wait is deprecated: use arrive_and_wait, which raises WaitTimedOut instead of returning None")?;
        let until = args::deadline(args::wait(py, timeout)?);
        self.recipe
            .run(py, self.mode, "Barrier.wait", move |recipe| async move {
                match recipe.arrive_and_wait_until(until).await {
                    Err(latchkey::Error::WaitTimedOut { .. }) => Ok(None),
                    other => other.map(Some),
                }
            })
    }

    /// (generation, arrived), or None when the barrier does not exist.
    fn state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.recipe
            .run(py, self.mode, "Barrier.state", move |recipe| async move {
                recipe.state().await
            })
    }
}
