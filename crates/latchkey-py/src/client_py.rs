//! `latchkey.Client` (blocking) and `latchkey.AsyncClient` (asyncio): one
//! connection each per process (core.rs), and the factories of every
//! primitive.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args;
use crate::core::{Core, Options};
use crate::errors::to_py;
use crate::lock::LockSpec;
use crate::lock_py::{AsyncLock, Lock};
use crate::runtime::{awaitable, block_on};

/// The connection arguments both clients take (and the Redlocks, with
/// `redlock` set and no Sentinel).
#[allow(clippy::too_many_arguments)]
pub(crate) fn options(
    py: Python<'_>,
    url: &Bound<'_, PyAny>,
    prefix: Option<&Bound<'_, PyAny>>,
    command_timeout: Option<f64>,
    sentinels: Option<Vec<String>>,
    master: Option<String>,
    tls_ca: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_server_name: Option<String>,
    redlock: Option<Option<Duration>>,
) -> PyResult<Options> {
    let invalid = |m: &str| to_py(py, crate::errors::invalid(m));
    // One URL, or the nodes of one Redis Cluster.
    let mut urls: Vec<String> = match url.extract::<String>() {
        Ok(one) => vec![one],
        Err(_) => url.extract::<Vec<String>>().map_err(|_| {
            invalid(if redlock.is_some() {
                "urls: a list of the URLs of the Redlock's independent instances"
            } else {
                "url: a URL, or a list of the URLs of one Redis Cluster's nodes"
            })
        })?,
    };
    if urls.is_empty() {
        return Err(invalid("url: an empty list"));
    }
    let first = urls.remove(0);
    let sentinel = match (sentinels, master) {
        (Some(sentinels), Some(master)) => Some((sentinels, master)),
        (None, None) => None,
        _ => return Err(invalid("sentinels and master go together")),
    };
    let tls_client = match (tls_cert, tls_key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => return Err(invalid("tls_cert and tls_key go together")),
    };
    Ok(Options {
        url: first,
        seeds: urls,
        sentinel,
        prefix: prefix.map(|p| args::name(py, p)).transpose()?,
        command_timeout: command_timeout
            .map(|t| args::bound(py, "command_timeout", t))
            .transpose()?,
        tls_ca,
        tls_client,
        tls_server_name,
        redlock,
    })
}

/// A lock's spec from Python's arguments, checked against the client when
/// it is connected (a bad name or TTL is refused here, not at acquire).
#[allow(clippy::too_many_arguments)]
pub(crate) fn lock_spec(
    py: Python<'_>,
    core: &Arc<Core>,
    name: &Bound<'_, PyAny>,
    ttl: f64,
    watchdog: bool,
    fencing: bool,
    fair: bool,
    cached: Option<f64>,
) -> PyResult<Arc<LockSpec>> {
    let spec = LockSpec {
        core: core.clone(),
        name: args::name(py, name)?,
        ttl: args::ttl(py, ttl)?,
        watchdog,
        fencing,
        fair,
        cached: cached.map(|c| args::seconds(py, "cached", c)).transpose()?,
        built: Default::default(),
    };
    let built = if let Some(client) = core.current() {
        Some(spec.build(&client))
    } else {
        core.current_redlock().map(|r| spec.build_redlock(&r))
    };
    if let Some(lock) = built {
        spec.finish(lock.map_err(|e| to_py(py, e))?)
            .map_err(|e| to_py(py, e))?;
    }
    Ok(Arc::new(spec))
}

/// A client of one Redis (blocking API). Connects at once; threads may
/// share it; a forked child connects again on first use.
#[pyclass(module = "latchkey._native", frozen, weakref, subclass)]
pub(crate) struct Client {
    pub(crate) core: Arc<Core>,
}

/// A client of one Redis (asyncio API): connects on its first use.
#[pyclass(module = "latchkey._native", frozen, weakref, subclass)]
pub(crate) struct AsyncClient {
    pub(crate) core: Arc<Core>,
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (url, *, prefix = None, command_timeout = None, sentinels = None, master = None, tls_ca = None, tls_cert = None, tls_key = None, tls_server_name = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        url: &Bound<'_, PyAny>,
        prefix: Option<&Bound<'_, PyAny>>,
        command_timeout: Option<f64>,
        sentinels: Option<Vec<String>>,
        master: Option<String>,
        tls_ca: Option<PathBuf>,
        tls_cert: Option<PathBuf>,
        tls_key: Option<PathBuf>,
        tls_server_name: Option<String>,
    ) -> PyResult<Self> {
        let core = Core::new(options(
            py,
            url,
            prefix,
            command_timeout,
            sentinels,
            master,
            tls_ca,
            tls_cert,
            tls_key,
            tls_server_name,
            None,
        )?);
        block_on(py, core.clone().client())?;
        Ok(Client { core })
    }

    /// A lock called `name` (str or bytes) held for `ttl` seconds, renewed
    /// by a watchdog while held unless `watchdog=False`; `cached=idle`
    /// keeps a released hold up to `idle` seconds for the next acquire.
    #[pyo3(signature = (name, ttl, *, watchdog = true, fencing = false, fair = false, cached = None))]
    #[allow(clippy::too_many_arguments)]
    fn lock(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        ttl: f64,
        watchdog: bool,
        fencing: bool,
        fair: bool,
        cached: Option<f64>,
    ) -> PyResult<Lock> {
        if self.core.current().is_none() {
            block_on(py, self.core.clone().client())?;
        }
        let spec = lock_spec(py, &self.core, name, ttl, watchdog, fencing, fair, cached)?;
        Ok(Lock { spec })
    }

    /// Waits, at most `timeout` seconds, for the background releases of
    /// guards that were dropped unreleased; True when all finished.
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
        format!("<latchkey.Client {:?}>", self.core.options.shown_url())
    }
}

#[pymethods]
impl AsyncClient {
    #[new]
    #[pyo3(signature = (url, *, prefix = None, command_timeout = None, sentinels = None, master = None, tls_ca = None, tls_cert = None, tls_key = None, tls_server_name = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        url: &Bound<'_, PyAny>,
        prefix: Option<&Bound<'_, PyAny>>,
        command_timeout: Option<f64>,
        sentinels: Option<Vec<String>>,
        master: Option<String>,
        tls_ca: Option<PathBuf>,
        tls_cert: Option<PathBuf>,
        tls_key: Option<PathBuf>,
        tls_server_name: Option<String>,
    ) -> PyResult<Self> {
        Ok(AsyncClient {
            core: Core::new(options(
                py,
                url,
                prefix,
                command_timeout,
                sentinels,
                master,
                tls_ca,
                tls_cert,
                tls_key,
                tls_server_name,
                None,
            )?),
        })
    }

    /// Connects now (else the first call does); returns the client.
    fn connect<'py>(slf: Py<Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let core = slf.get().core.clone();
        awaitable(py, "AsyncClient.connect", async move {
            core.client().await?;
            Ok(slf)
        })
    }

    /// As `Client.lock`; the name and TTL are checked here once connected,
    /// else at the first acquire.
    #[pyo3(signature = (name, ttl, *, watchdog = true, fencing = false, fair = false, cached = None))]
    #[allow(clippy::too_many_arguments)]
    fn lock(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        ttl: f64,
        watchdog: bool,
        fencing: bool,
        fair: bool,
        cached: Option<f64>,
    ) -> PyResult<AsyncLock> {
        let spec = lock_spec(py, &self.core, name, ttl, watchdog, fencing, fair, cached)?;
        Ok(AsyncLock { spec })
    }

    /// As `Client.flush`, a coroutine.
    #[pyo3(signature = (timeout = 5.0))]
    fn flush<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Bound<'py, PyAny>> {
        let within: Duration = args::bound(py, "timeout", timeout)?;
        awaitable(py, "AsyncClient.flush", self.core.clone().flush(within))
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
        format!("<latchkey.AsyncClient {:?}>", self.core.options.shown_url())
    }
}
