//! `latchkey.Redlock` (blocking) and `latchkey.AsyncRedlock` (asyncio): one
//! lock over N independent Redis instances, held while a majority agree.
//! They make the same `Lock` / `AsyncLock` classes as the clients (a
//! Redlock core, core.rs, builds its locks on `latchkey::Redlock`).

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args;
use crate::client_py::{lock_spec, options};
use crate::core::Core;
use crate::errors::to_py;
use crate::lock_py::{AsyncLock, Lock};
use crate::runtime::{awaitable, block_on};

/// A Redlock's core from the arguments both classes take.
#[allow(clippy::too_many_arguments)]
fn redlock_core(
    py: Python<'_>,
    urls: &Bound<'_, PyAny>,
    prefix: Option<&Bound<'_, PyAny>>,
    command_timeout: Option<f64>,
    instance_timeout: Option<f64>,
    tls_ca: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_server_name: Option<String>,
) -> PyResult<Arc<Core>> {
    if urls.extract::<String>().is_ok() {
        return Err(to_py(
            py,
            crate::errors::invalid(
                "urls: a list of the URLs of the independent instances, not one URL",
            ),
        ));
    }
    let instance_timeout = instance_timeout
        .map(|t| args::bound(py, "instance_timeout", t))
        .transpose()?;
    Ok(Core::new(options(
        py,
        urls,
        prefix,
        command_timeout,
        None,
        None,
        tls_ca,
        tls_cert,
        tls_key,
        tls_server_name,
        Some(instance_timeout),
    )?))
}

/// The Redlock a core connected, for its figures.
fn connected(py: Python<'_>, core: &Arc<Core>) -> PyResult<latchkey::Redlock> {
    match core.current_redlock() {
        Some(redlock) => Ok(redlock),
        None => block_on(py, core.clone().redlock()),
    }
}

/// One lock over N independent Redis instances (blocking API). Connects at
/// once (returns when a majority answered; the rest join when they do).
#[pyclass(module = "latchkey._native", frozen, weakref, subclass)]
pub(crate) struct Redlock {
    pub(crate) core: Arc<Core>,
}

/// As `Redlock`, for asyncio: connects on its first use.
#[pyclass(module = "latchkey._native", frozen, weakref, subclass)]
pub(crate) struct AsyncRedlock {
    pub(crate) core: Arc<Core>,
}

#[pymethods]
impl Redlock {
    #[new]
    #[pyo3(signature = (urls, *, prefix = None, command_timeout = None, instance_timeout = None, tls_ca = None, tls_cert = None, tls_key = None, tls_server_name = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        urls: &Bound<'_, PyAny>,
        prefix: Option<&Bound<'_, PyAny>>,
        command_timeout: Option<f64>,
        instance_timeout: Option<f64>,
        tls_ca: Option<PathBuf>,
        tls_cert: Option<PathBuf>,
        tls_key: Option<PathBuf>,
        tls_server_name: Option<String>,
    ) -> PyResult<Self> {
        let core = redlock_core(
            py,
            urls,
            prefix,
            command_timeout,
            instance_timeout,
            tls_ca,
            tls_cert,
            tls_key,
            tls_server_name,
        )?;
        block_on(py, core.clone().redlock())?;
        Ok(Redlock { core })
    }

    /// A lock called `name`, held while a majority of the instances hold
    /// it; the same keywords as `Client.lock` (`fair` is not offered).
    #[pyo3(signature = (name, ttl, *, watchdog = true, fencing = false))]
    fn lock(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        ttl: f64,
        watchdog: bool,
        fencing: bool,
    ) -> PyResult<Lock> {
        connected(py, &self.core)?;
        let spec = lock_spec(py, &self.core, name, ttl, watchdog, fencing, false, None)?;
        Ok(Lock { spec })
    }

    /// The number of instances, N.
    #[getter]
    fn instances(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(connected(py, &self.core)?.instances())
    }

    /// How many instances must agree: N/2 + 1.
    #[getter]
    fn quorum(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(connected(py, &self.core)?.quorum())
    }

    /// As `Client.flush`.
    #[pyo3(signature = (timeout = 5.0))]
    fn flush(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let within = args::bound(py, "timeout", timeout)?;
        block_on(py, self.core.clone().flush(within))
    }

    /// The key prefix in force.
    #[getter]
    fn prefix<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.core.prefix())
    }

    fn __repr__(&self) -> String {
        format!(
            "<latchkey.Redlock {} instances>",
            1 + self.core.options.seeds.len()
        )
    }
}

#[pymethods]
impl AsyncRedlock {
    #[new]
    #[pyo3(signature = (urls, *, prefix = None, command_timeout = None, instance_timeout = None, tls_ca = None, tls_cert = None, tls_key = None, tls_server_name = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        urls: &Bound<'_, PyAny>,
        prefix: Option<&Bound<'_, PyAny>>,
        command_timeout: Option<f64>,
        instance_timeout: Option<f64>,
        tls_ca: Option<PathBuf>,
        tls_cert: Option<PathBuf>,
        tls_key: Option<PathBuf>,
        tls_server_name: Option<String>,
    ) -> PyResult<Self> {
        Ok(AsyncRedlock {
            core: redlock_core(
                py,
                urls,
                prefix,
                command_timeout,
                instance_timeout,
                tls_ca,
                tls_cert,
                tls_key,
                tls_server_name,
            )?,
        })
    }

    /// Connects now (else the first acquire does); returns the Redlock.
    fn connect<'py>(slf: Py<Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let core = slf.get().core.clone();
        awaitable(py, "AsyncRedlock.connect", async move {
            core.redlock().await?;
            Ok(slf)
        })
    }

    /// As `Redlock.lock`; the name and TTL are checked here once connected,
    /// else at the first acquire.
    #[pyo3(signature = (name, ttl, *, watchdog = true, fencing = false))]
    fn lock(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        ttl: f64,
        watchdog: bool,
        fencing: bool,
    ) -> PyResult<AsyncLock> {
        let spec = lock_spec(py, &self.core, name, ttl, watchdog, fencing, false, None)?;
        Ok(AsyncLock { spec })
    }

    /// The number of instances, N (known before connecting).
    #[getter]
    fn instances(&self) -> usize {
        1 + self.core.options.seeds.len()
    }

    /// How many instances must agree: N/2 + 1.
    #[getter]
    fn quorum(&self) -> usize {
        self.instances() / 2 + 1
    }

    /// As `Client.flush`, a coroutine.
    #[pyo3(signature = (timeout = 5.0))]
    fn flush<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Bound<'py, PyAny>> {
        let within = args::bound(py, "timeout", timeout)?;
        awaitable(py, "AsyncRedlock.flush", self.core.clone().flush(within))
    }

    /// Flushes, in the blocking way (for the interpreter's exit).
    #[pyo3(signature = (timeout = 5.0))]
    fn flush_blocking(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let within = args::bound(py, "timeout", timeout)?;
        block_on(py, self.core.clone().flush(within))
    }

    #[getter]
    fn prefix<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.core.prefix())
    }

    fn __repr__(&self) -> String {
        format!("<latchkey.AsyncRedlock {} instances>", self.instances())
    }
}
