//! Every call into the Rust API of a barrier (`latchkey::Barrier`), and its
//! Python class.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;

use crate::args;
use crate::core::Core;
use crate::runtime::run;

pub(crate) struct BarrierSpec {
    pub(crate) core: Arc<Core>,
    pub(crate) name: Vec<u8>,
    pub(crate) parties: u64,
    pub(crate) ttl: Duration,
}

impl BarrierSpec {
    pub(crate) fn build(&self, client: &latchkey::Client) -> latchkey::Result<latchkey::Barrier> {
        client.barrier(&self.name, self.parties, self.ttl)
    }

    async fn barrier(&self) -> latchkey::Result<latchkey::Barrier> {
        let client = self.core.clone().client().await?;
        self.build(&client)
    }
}

/// `parties` meet, round after round.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct Barrier {
    pub(crate) spec: Arc<BarrierSpec>,
    pub(crate) asyncio: bool,
}

#[pymethods]
impl Barrier {
    /// Arrives and waits for the others, at most `timeout` seconds: the
    /// generation released, or None when the time ran out (the arrival is
    /// taken back).
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let wait = args::wait(py, timeout)?.unwrap_or(args::FOREVER);
        let spec = self.spec.clone();
        run(py, self.asyncio, "Barrier.wait", async move {
            match spec.barrier().await?.arrive_and_wait_timeout(wait).await {
                Err(latchkey::Error::WaitTimedOut { .. }) => Ok(None),
                other => other.map(Some),
            }
        })
    }

    /// (generation, arrived), or None when the barrier does not exist.
    fn state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let spec = self.spec.clone();
        run(py, self.asyncio, "Barrier.state", async move {
            spec.barrier().await?.state().await
        })
    }

    #[getter]
    fn parties(&self) -> u64 {
        self.spec.parties
    }
}
