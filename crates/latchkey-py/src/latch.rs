//! Every call into the Rust API of a latch (`latchkey::Latch`), and its
//! Python class.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args;
use crate::core::Core;
use crate::runtime::run;

pub(crate) struct LatchSpec {
    pub(crate) core: Arc<Core>,
    pub(crate) name: Vec<u8>,
    pub(crate) ttl: Duration,
}

impl LatchSpec {
    pub(crate) fn build(&self, client: &latchkey::Client) -> latchkey::Result<latchkey::Latch> {
        client.latch(&self.name, self.ttl)
    }

    async fn latch(&self) -> latchkey::Result<latchkey::Latch> {
        let client = self.core.clone().client().await?;
        self.build(&client)
    }
}

/// A count-down latch kept in Redis: a late waiter returns at once.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct Latch {
    pub(crate) spec: Arc<LatchSpec>,
    pub(crate) asyncio: bool,
}

#[pymethods]
impl Latch {
    /// Creates the latch with `count` (True if this call made it).
    fn create(&self, py: Python<'_>, count: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let count = args::count(py, "latch count", count)?;
        let spec = self.spec.clone();
        run(py, self.asyncio, "Latch.create", async move {
            spec.latch().await?.create(count).await
        })
    }

    /// Counts down by one; the count left.
    fn count_down(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let spec = self.spec.clone();
        run(py, self.asyncio, "Latch.count_down", async move {
            spec.latch().await?.count_down().await
        })
    }

    /// The count left (0: open), or None when the latch does not exist.
    fn count(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let spec = self.spec.clone();
        run(py, self.asyncio, "Latch.count", async move {
            spec.latch().await?.count().await
        })
    }

    /// Waits until open, at most `timeout` seconds: whether it opened.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let deadline = args::wait(py, timeout)?.map(|w| Instant::now() + w);
        let spec = self.spec.clone();
        run(py, self.asyncio, "Latch.wait", async move {
            let latch = spec.latch().await?;
            let opened = match deadline {
                Some(deadline) => latch.wait_until(deadline).await,
                None => latch.wait().await,
            };
            match opened {
                Ok(()) => Ok(true),
                Err(latchkey::Error::WaitTimedOut { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }

    #[getter]
    fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.spec.name)
    }
}
