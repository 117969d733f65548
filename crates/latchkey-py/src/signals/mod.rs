//! Signals (`Client::signal`, `signal_one`, `wait_any`), the Python class
//! of a received signal, and listeners (listen.rs).

pub(crate) mod listen;

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::clients::core::Core;

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
pub(crate) struct Received(pub(crate) latchkey::Signal);

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

/// The first signal on any of `names` within `wait`; `WaitTimedOut`
/// after it, or `None` then with `old_none` (the deprecated `Client.wait`).
pub(crate) async fn wait_any(
    core: Arc<Core>,
    names: Vec<Vec<u8>>,
    wait: Duration,
    old_none: bool,
) -> latchkey::Result<Option<Received>> {
    let client = core.connect().await?;
    match client.wait_any(names, wait).await {
        Ok(signal) => Ok(Some(Received(signal))),
        Err(latchkey::Error::WaitTimedOut { .. }) if old_none => Ok(None),
        Err(e) => Err(e),
    }
}
