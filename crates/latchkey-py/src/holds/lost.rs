//! `guard.lost`: a `threading.Event`-like view of a hold's lost signal
//! (`is_set()`, `wait(timeout)`); the asyncio twin's `wait` is a
//! coroutine, and the event itself can be awaited.

use std::time::{Duration, Instant};

use latchkey::LostSignal;
use pyo3::prelude::*;

use crate::args;
use crate::recipes::twins;
use crate::runtime::{awaitable, run, Mode};

/// Set once the hold can no longer be proven ours: stop working on the
/// resource then.
#[pyclass(module = "latchkey._native", name = "_LostEvent", subclass, frozen)]
pub(crate) struct LostBase {
    pub(crate) lost: LostSignal,
    /// The process that holds the hold: in a forked child the copy of a
    /// parent's guard does not hold, so its event is set.
    pub(crate) owner: u32,
    pub(crate) mode: Mode,
}

twins!(LostBase => LostEvent, AsyncLostEvent; lost_event);

/// Completes with whether the signal fired within `wait` (`None`: waits
/// until it does).
async fn fired(lost: LostSignal, wait: Option<Duration>) -> latchkey::Result<bool> {
    match wait {
        None => {
            lost.lost().await;
            Ok(true)
        }
        Some(wait) => {
            let until = tokio::time::Instant::from_std(Instant::now() + wait);
            Ok(tokio::time::timeout_at(until, lost.lost()).await.is_ok())
        }
    }
}

#[pymethods]
impl LostBase {
    /// Whether the hold is known to be lost (always in a forked child).
    /// Asks nobody.
    fn is_set(&self) -> bool {
        self.owner != crate::runtime::pid() || self.lost.is_lost()
    }

    /// Waits until lost, at most `timeout` seconds (None: no bound);
    /// returns `is_set()`, as `threading.Event.wait`.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let wait = args::wait(py, timeout)?;
        let set = self.is_set();
        let lost = self.lost.clone();
        run(py, self.mode, "LostEvent.wait", async move {
            match set || wait == Some(Duration::ZERO) {
                true => Ok(set),
                false => fired(lost, wait).await,
            }
        })
    }

    fn __repr__(&self) -> String {
        let class = match self.mode {
            Mode::Blocking => "LostEvent",
            Mode::Asyncio => "AsyncLostEvent",
        };
        format!("<latchkey.{class} set={}>", self.is_set())
    }
}

#[pymethods]
impl AsyncLostEvent {
    /// `await guard.lost`: completes when lost.
    fn __await__<'py>(slf: PyRef<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lost = slf.as_super().lost.clone();
        awaitable(py, "AsyncLostEvent.__await__", fired(lost, None))?.call_method0("__await__")
    }
}
