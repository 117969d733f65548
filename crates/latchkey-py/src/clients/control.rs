//! What a client does to names rather than holds: signals, listening,
//! and an operator's control over holds (`revoke`, `request_release`).

use pyo3::prelude::*;

use super::factories::names;
use super::ClientBase;
use crate::args;
use crate::runtime::run;
use crate::signals;

/// One kind of hold revoked: `kind` (`lock`, `semaphore`, …), how many
/// holds `ended`, and the `fencing_token` to raise a fenced resource to
/// (above every revoked holder's, at or below every later one's).
#[pyclass(module = "latchkey._native", frozen, get_all)]
pub(crate) struct Revocation {
    kind: &'static str,
    ended: u64,
    fencing_token: Option<u64>,
}

#[pymethods]
impl Revocation {
    fn __repr__(&self) -> String {
        format!(
            "<latchkey.Revocation kind={:?} ended={} fencing_token={:?}>",
            self.kind, self.ended, self.fencing_token
        )
    }
}

type Arg<'py> = Bound<'py, PyAny>;
type Answer = PyResult<Py<PyAny>>;

impl ClientBase {
    /// A signal's name and payload (none: empty), and the core to send it.
    fn signalled(
        &self,
        py: Python<'_>,
        name: &Arg<'_>,
        payload: Option<&Arg<'_>>,
    ) -> PyResult<(Vec<u8>, Vec<u8>, std::sync::Arc<super::core::Core>)> {
        let payload = payload.map(|p| args::name(py, p)).transpose()?;
        let name = args::name(py, name)?;
        Ok((name, payload.unwrap_or_default(), self.core.clone()))
    }

    /// `wait_any`, or the deprecated `wait` (`old_none`: None on timeout).
    fn first_signal(
        &self,
        py: Python<'_>,
        names: &Arg<'_>,
        timeout: Option<f64>,
        old_none: bool,
    ) -> Answer {
        let names = self::names(py, names)?
            .into_iter()
            .map(|n| n.bytes)
            .collect();
        let wait = args::wait(py, timeout)?.unwrap_or(args::FOREVER);
        let qualname = if old_none {
            "Client.wait"
        } else {
            "Client.wait_any"
        };
        let waiting = signals::wait_any(self.core.clone(), names, wait, old_none);
        run(py, self.mode, qualname, waiting)
    }
}

#[pymethods]
impl ClientBase {
    /// Signals every process waiting on `name` now: how many heard it.
    #[pyo3(signature = (name, payload = None))]
    fn signal(&self, py: Python<'_>, name: &Arg<'_>, payload: Option<&Arg<'_>>) -> Answer {
        let (name, payload, core) = self.signalled(py, name, payload)?;
        run(py, self.mode, "Client.signal", async move {
            core.connect().await?.signal(name, payload).await
        })
    }

    /// Signals one waiter of `name`: whether one heard it.
    #[pyo3(signature = (name, payload = None))]
    fn signal_one(&self, py: Python<'_>, name: &Arg<'_>, payload: Option<&Arg<'_>>) -> Answer {
        let (name, payload, core) = self.signalled(py, name, payload)?;
        run(py, self.mode, "Client.signal_one", async move {
            core.connect().await?.signal_one(name, payload).await
        })
    }

    /// Subscribes to `names` (one name or a list; glob patterns with
    /// `patterns=True`) and returns a `Listener` that keeps the
    /// subscriptions between receives.
    #[pyo3(signature = (names, *, patterns = false))]
    fn listen(
        &self,
        py: Python<'_>,
        names: &Bound<'_, PyAny>,
        patterns: bool,
    ) -> PyResult<Py<PyAny>> {
        let names = self::names(py, names)?
            .into_iter()
            .map(|n| n.bytes)
            .collect();
        let opening = signals::listen::open(self.core.clone(), names, patterns, self.mode);
        run(py, self.mode, "Client.listen", opening)
    }

    /// The first signal on `names` (one name or a list) within `timeout`
    /// seconds; raises `WaitTimedOut` when none came.
    #[pyo3(signature = (names, timeout = None))]
    fn wait_any(&self, py: Python<'_>, names: &Arg<'_>, timeout: Option<f64>) -> Answer {
        self.first_signal(py, names, timeout, false)
    }

    /// Deprecated (returns None on timeout): `wait_any`, which raises
    /// `WaitTimedOut` as every wait does.
    #[pyo3(signature = (names, timeout = None))]
    fn wait(&self, py: Python<'_>, names: &Arg<'_>, timeout: Option<f64>) -> Answer {
        crate::errors::deprecated(py, "Client.wait is deprecated: use wait_any, which raises WaitTimedOut instead of returning None")?;
        self.first_signal(py, names, timeout, true)
    }

    /// Ends the holds of `name`, whoever holds them (an operator's
    /// revocation; the holders' `lost` fires, reason `revoked`): one
    /// `Revocation` per kind held, empty when nothing held `name`.
    fn revoke(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let (name, core) = (args::name(py, name)?, self.core.clone());
        run(py, self.mode, "Client.revoke", async move {
            let revoked = core.connect().await?.revoke(name).await?;
            let revoked: Vec<Revocation> = revoked
                .into_iter()
                .map(|r| Revocation {
                    kind: r.kind.as_str(),
                    ended: r.ended,
                    fencing_token: r.fencing_token,
                })
                .collect();
            Ok(revoked)
        })
    }

    /// Asks the holders of `name` to let go (their `release_requested`
    /// returns; nothing is taken away): how many connections heard it.
    fn request_release(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let (name, core) = (args::name(py, name)?, self.core.clone());
        run(py, self.mode, "Client.request_release", async move {
            core.connect().await?.request_release(name).await
        })
    }
}
