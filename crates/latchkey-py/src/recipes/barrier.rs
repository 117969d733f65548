//! A cyclic barrier in Redis: `Barrier`/`AsyncBarrier`.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;

use super::{twins, Made};
use crate::args::{self, Name};
use crate::clients::core::Core;
use crate::runtime::{run, Mode};

/// `parties` meet, round after round.
#[pyclass(module = "latchkey._native", name = "_Barrier", subclass, frozen)]
pub(crate) struct BarrierBase {
    recipe: Arc<Made<latchkey::Barrier>>,
    name: Name,
    parties: u64,
    mode: Mode,
}

twins!(BarrierBase => Barrier, AsyncBarrier; barrier_class);

/// `client.barrier(name, parties, ttl)`.
pub(crate) fn barrier(
    py: Python<'_>,
    core: &Arc<Core>,
    name: Name,
    parties: u64,
    ttl: Duration,
    mode: Mode,
) -> PyResult<Py<PyAny>> {
    let bytes = name.bytes.clone();
    let recipe = Made::new(py, core, move |c| c.client()?.barrier(&bytes, parties, ttl))?;
    barrier_class(
        py,
        BarrierBase {
            recipe,
            name,
            parties,
            mode,
        }
        .into(),
        mode,
    )
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
        let recipe = self.recipe.clone();
        run(py, self.mode, "Barrier.wait", async move {
            match recipe.get().await?.arrive_and_wait_until(until).await {
                Err(latchkey::Error::WaitTimedOut { .. }) => Ok(None),
                other => other.map(Some),
            }
        })
    }

    /// (generation, arrived), or None when the barrier does not exist.
    fn state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let recipe = self.recipe.clone();
        run(py, self.mode, "Barrier.state", async move {
            recipe.get().await?.state().await
        })
    }

    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyAny> {
        self.name.to_py(py)
    }

    #[getter]
    fn parties(&self) -> u64 {
        self.parties
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let me = slf.get();
        Ok(format!(
            "<latchkey.{} name={} parties={}>",
            slf.get_type().name()?,
            me.name.shown(),
            me.parties
        ))
    }
}
