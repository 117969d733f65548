//! Every call into the Rust API of signals (`Client::signal`, `signal_one`,
//! `wait_any`) and fenced resources (`latchkey::FencedResource`), and their
//! Python classes.

use std::sync::Arc;
use std::time::Duration;

use latchkey::FencedWrite;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::core::Core;
use crate::runtime::run;

/// A signal received: its `name`, `payload` and whether it was `unicast`
/// (sent by `signal_one` to this waiter alone).
#[pyclass(module = "latchkey._native", frozen, get_all)]
pub(crate) struct Signal {
    name: Py<PyBytes>,
    payload: Py<PyBytes>,
    unicast: bool,
}

#[pymethods]
impl Signal {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<latchkey.Signal name={:?} payload={:?} unicast={}>",
            String::from_utf8_lossy(self.name.as_bytes(py)),
            String::from_utf8_lossy(self.payload.as_bytes(py)),
            self.unicast
        )
    }
}

/// A `Signal` before it meets the GIL.
pub(crate) struct Received(latchkey::Signal);

impl<'py> IntoPyObject<'py> for Received {
    type Target = Signal;
    type Output = Bound<'py, Signal>;
    type Error = PyErr;
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        Bound::new(
            py,
            Signal {
                name: PyBytes::new(py, &self.0.name).unbind(),
                payload: PyBytes::new(py, &self.0.payload).unbind(),
                unicast: self.0.unicast,
            },
        )
    }
}

/// Signals every process waiting on `name` now: how many heard it.
pub(crate) async fn signal(
    core: Arc<Core>,
    name: Vec<u8>,
    payload: Vec<u8>,
) -> latchkey::Result<usize> {
    core.client().await?.signal(name, payload).await
}

/// Signals one waiter of `name`: whether one heard it.
pub(crate) async fn signal_one(
    core: Arc<Core>,
    name: Vec<u8>,
    payload: Vec<u8>,
) -> latchkey::Result<bool> {
    core.client().await?.signal_one(name, payload).await
}

/// The first signal on any of `names` within `wait`, or None.
pub(crate) async fn wait(
    core: Arc<Core>,
    names: Vec<Vec<u8>>,
    wait: Duration,
) -> latchkey::Result<Option<Received>> {
    let client = core.client().await?;
    match client.wait_any(names, wait).await {
        Ok(signal) => Ok(signal.map(Received)),
        Err(latchkey::Error::WaitTimedOut { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

pub(crate) struct FencedSpec {
    pub(crate) core: Arc<Core>,
    pub(crate) name: Vec<u8>,
}

impl FencedSpec {
    pub(crate) fn build(
        &self,
        client: &latchkey::Client,
    ) -> latchkey::Result<latchkey::FencedResource> {
        client.fenced(&self.name)
    }

    async fn resource(&self) -> latchkey::Result<latchkey::FencedResource> {
        let client = self.core.clone().client().await?;
        self.build(&client)
    }
}

/// A value in Redis that refuses the writes of stale holders: a write with
/// a fencing token below the highest seen is rejected.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct FencedResource {
    pub(crate) spec: Arc<FencedSpec>,
    pub(crate) asyncio: bool,
}

#[pymethods]
impl FencedResource {
    /// Stores `value` if `token` is at least the highest seen: True when
    /// stored, False when refused (a newer holder wrote).
    fn write(&self, py: Python<'_>, token: u64, value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let value = crate::args::name(py, value)?;
        let spec = self.spec.clone();
        run(py, self.asyncio, async move {
            Ok(spec.resource().await?.write(token, value).await? == FencedWrite::Accepted)
        })
    }

    /// (value, token of the write that stored it), or None.
    fn read(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let spec = self.spec.clone();
        run(py, self.asyncio, async move {
            spec.resource().await?.read().await
        })
    }
}
