//! `guard.lost`: a `threading.Event`-like view of a hold's lost signal
//! (`is_set()`, `wait(timeout)`), blocking or awaitable.

use std::time::{Duration, Instant};

use latchkey::LostSignal;
use pyo3::prelude::*;

use crate::args;
use crate::runtime::{awaitable, block_on};

/// Set once the hold can no longer be proven ours: stop working on the
/// resource then.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct LostEvent {
    pub(crate) lost: LostSignal,
    /// The process that holds the hold: in a forked child the copy of a
    /// parent's guard does not hold, so its event is set.
    pub(crate) owner: u32,
}

/// The same, whose `wait` is a coroutine, and which can be awaited itself.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct AsyncLostEvent {
    pub(crate) lost: LostSignal,
    pub(crate) owner: u32,
}

/// Whether the hold is known lost here: always in a forked child.
fn is_lost(lost: &LostSignal, owner: u32) -> bool {
    owner != crate::runtime::pid() || lost.is_lost()
}

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
impl LostEvent {
    /// Whether the hold is known to be lost. Asks nobody.
    fn is_set(&self) -> bool {
        is_lost(&self.lost, self.owner)
    }

    /// Waits until lost, at most `timeout` seconds (None: no bound);
    /// returns `is_set()`, as `threading.Event.wait`.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let wait = args::wait(py, timeout)?;
        if self.is_set() || wait == Some(Duration::ZERO) {
            return Ok(self.is_set());
        }
        block_on(py, fired(self.lost.clone(), wait))
    }

    fn __repr__(&self) -> String {
        format!("<latchkey.LostEvent set={}>", self.is_set())
    }
}

#[pymethods]
impl AsyncLostEvent {
    /// Whether the hold is known to be lost. Asks nobody.
    fn is_set(&self) -> bool {
        is_lost(&self.lost, self.owner)
    }

    /// Completes when lost or after `timeout` seconds, with `is_set()`.
    #[pyo3(signature = (timeout = None))]
    fn wait<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        let wait = args::wait(py, timeout)?;
        let lost = self.is_set();
        let signal = self.lost.clone();
        awaitable(py, "AsyncLostEvent.wait", async move {
            match lost {
                true => Ok(true),
                false => fired(signal, wait).await,
            }
        })
    }

    /// `await guard.lost`: completes when lost.
    fn __await__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(
            py,
            "AsyncLostEvent.__await__",
            fired(self.lost.clone(), None),
        )?
        .call_method0("__await__")
    }

    fn __repr__(&self) -> String {
        format!("<latchkey.AsyncLostEvent set={}>", self.is_set())
    }
}
