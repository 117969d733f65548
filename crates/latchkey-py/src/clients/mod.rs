//! The clients: one base class, `_Client` (a connection per process,
//! core.rs, and every factory, factories.rs), and its four leaves, made by
//! one construction (options.rs): `Client` and `AsyncClient` of one Redis
//! (or a cluster, or behind Sentinel), `Redlock` and `AsyncRedlock` over N
//! independent instances (locks only).

pub(crate) mod control;
pub(crate) mod core;
mod factories;
mod options;
mod refusals;

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use self::core::Core;
use crate::args;
use crate::runtime::{awaitable, block_on, coroutine, Mode};

/// A client; its leaf class says which API (blocking or asyncio) and
/// which deployment (one Redis, or a Redlock).
#[pyclass(
    module = "latchkey._native",
    name = "_Client",
    subclass,
    frozen,
    weakref
)]
pub(crate) struct ClientBase {
    pub(crate) core: Arc<Core>,
    pub(crate) mode: Mode,
}

/// A client of one Redis, a Redis Cluster or a Sentinel-watched primary
/// (blocking API). Connects at once; threads may share it; a forked child
/// connects again on first use.
#[pyclass(module = "latchkey._native", extends = ClientBase, frozen, weakref)]
pub(crate) struct Client {}

/// As `Client`, for asyncio: connects on first use (or `await connect()`).
#[pyclass(module = "latchkey._native", extends = ClientBase, frozen, weakref)]
pub(crate) struct AsyncClient {}

/// What only a Redlock tells: its instances and quorum.
#[pyclass(module = "latchkey._native", name = "_Redlock", extends = ClientBase, subclass, frozen, weakref)]
pub(crate) struct RedlockBase {}

/// One lock over N independent Redis instances, held while a majority
/// agree (blocking API). Connects at once (returns when a majority
/// answered; the rest join when they do).
#[pyclass(module = "latchkey._native", extends = RedlockBase, frozen, weakref)]
pub(crate) struct Redlock {}

/// As `Redlock`, for asyncio: connects on first use.
#[pyclass(module = "latchkey._native", extends = RedlockBase, frozen, weakref)]
pub(crate) struct AsyncRedlock {}

/// The base of a client of `mode`: connected now when blocking, unless
/// `connect=False` (then on first use, as an asyncio client).
fn made(py: Python<'_>, options: options::Options, mode: Mode) -> PyResult<ClientBase> {
    let connect_now = options.connect_now;
    if !connect_now {
        // Not connected now: a URL that cannot be one is refused here, not
        // at the first use.
        for url in std::iter::once(&options.url).chain(&options.seeds) {
            if redis::IntoConnectionInfo::into_connection_info(url.as_str()).is_err() {
                return Err(crate::errors::to_py(py, latchkey::Error::InvalidInput(format!(
                    "bad Redis URL {:?}: expected redis://[user[:password]@]host[:port][/db], rediss://… for TLS, or unix:///path/to/socket",
                    latchkey::redact_url(url)
                ))));
            }
        }
    }
    let core = Core::new(options);
    // A level set since the last look is seen from this client's first call.
    crate::observe::log::refresh(py);
    if connect_now {
        block_on(py, core.clone().connect())?;
    }
    Ok(ClientBase { core, mode })
}

/// A client class's constructor: its first argument, which deployment and
/// mode, its signature for `help()`, and the class chain over the base.
macro_rules! constructor {
    ($class:ident($arg:ident), $redlock:literal, $mode:expr, $signature:literal, |$base:ident| $chain:expr) => {
        #[pymethods]
        impl $class {
            #[new]
            #[pyo3(signature = ($arg, **kwargs), text_signature = $signature)]
            fn new(
                py: Python<'_>,
                $arg: &Bound<'_, PyAny>,
                kwargs: Option<&Bound<'_, PyDict>>,
            ) -> PyResult<PyClassInitializer<Self>> {
                let options = options::options(py, $arg, kwargs, $redlock, $mode)?;
                let $base = PyClassInitializer::from(made(py, options, $mode)?);
                Ok($chain)
            }
        }
    };
}

constructor!(Client(url), false, Mode::Blocking,
    "(url, *, connect=True, prefix=None, command_timeout=None, sentinels=None, master=None, tls_ca=None, tls_cert=None, tls_key=None, tls_server_name=None)",
    |base| base.add_subclass(Client {}));
constructor!(AsyncClient(url), false, Mode::Asyncio,
    "(url, *, prefix=None, command_timeout=None, sentinels=None, master=None, tls_ca=None, tls_cert=None, tls_key=None, tls_server_name=None)",
    |base| base.add_subclass(AsyncClient {}));
constructor!(Redlock(urls), true, Mode::Blocking,
    "(urls, *, connect=True, prefix=None, command_timeout=None, instance_timeout=None, tls_ca=None, tls_cert=None, tls_key=None, tls_server_name=None)",
    |base| base.add_subclass(RedlockBase {}).add_subclass(Redlock {}));
constructor!(AsyncRedlock(urls), true, Mode::Asyncio,
    "(urls, *, prefix=None, command_timeout=None, instance_timeout=None, tls_ca=None, tls_cert=None, tls_key=None, tls_server_name=None)",
    |base| base.add_subclass(RedlockBase {}).add_subclass(AsyncRedlock {}));

#[pymethods]
impl RedlockBase {
    /// The number of instances, N.
    #[getter]
    fn instances(slf: PyRef<'_, Self>) -> usize {
        1 + slf.as_super().core.options.seeds.len()
    }

    /// How many instances must agree: N/2 + 1.
    #[getter]
    fn quorum(slf: PyRef<'_, Self>) -> usize {
        // N/2 + 1, with N = 1 + seeds.
        slf.as_super().core.options.seeds.len().div_ceil(2) + 1
    }
}

#[pymethods]
impl ClientBase {
    /// Connects now (a blocking client is connected already); returns the
    /// client.
    fn connect<'py>(slf: Bound<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let core = slf.get().core.clone();
        match slf.get().mode {
            Mode::Blocking => {
                block_on(py, core.connect())?;
                Ok(slf.into_any())
            }
            Mode::Asyncio => {
                let slf = slf.unbind();
                awaitable(py, "AsyncClient.connect", async move {
                    core.connect().await?;
                    Ok(slf)
                })
            }
        }
    }

    /// Waits, at most `timeout` seconds, for the background releases of
    /// calls cancelled and of holds found lost, and gives back the holds
    /// cached locks keep idle; True when all finished.
    #[pyo3(signature = (timeout = 5.0))]
    fn flush(&self, py: Python<'_>, timeout: f64) -> PyResult<Py<PyAny>> {
        let within = args::bound(py, "timeout", timeout)?;
        let flushing = self.core.clone().flush(within);
        match self.mode {
            Mode::Blocking => Ok(pyo3::IntoPyObjectExt::into_py_any(
                block_on(py, flushing)?,
                py,
            )?),
            Mode::Asyncio => Ok(coroutine(py, "AsyncClient.flush", flushing, true)?.unbind()),
        }
    }

    /// Gives back every hold taken through this client (and the holds
    /// cached locks keep), ends its waits in flight, waits at most
    /// `timeout` seconds for the releases, and refuses every later call
    /// (`ClientClosed`). True when all finished in time. Idempotent.
    #[pyo3(signature = (timeout = 5.0))]
    fn close(&self, py: Python<'_>, timeout: f64) -> PyResult<Py<PyAny>> {
        let within = args::bound(py, "timeout", timeout)?;
        let closing = self.core.clone().close(within);
        match self.mode {
            Mode::Blocking => Ok(pyo3::IntoPyObjectExt::into_py_any(
                block_on(py, closing)?,
                py,
            )?),
            Mode::Asyncio => Ok(coroutine(py, "AsyncClient.close", closing, true)?.unbind()),
        }
    }

    /// Flushes in the blocking way, from either API (at exit, in a test).
    #[pyo3(signature = (timeout = 5.0))]
    fn flush_blocking(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let within = args::bound(py, "timeout", timeout)?;
        block_on(py, self.core.clone().flush(within))
    }

    /// The key prefix in force.
    #[getter]
    fn prefix<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.core.prefix())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let core = &slf.get().core;
        let more = match core.options.seeds.len() {
            0 => String::new(),
            n => format!(" (+{n} more)"),
        };
        Ok(format!(
            "<latchkey.{} {:?}{more} connected={}>",
            slf.get_type().name()?,
            core.options.shown_url(),
            core.connected().is_some()
        ))
    }
}
