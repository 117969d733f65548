//! `client.listen(names)`: a `Listener` that keeps its subscriptions, so
//! signals sent between two receives are not lost (a `wait` per signal
//! leaves a gap). Iterable in both APIs (`for` / `async for`); `close()`
//! (or leaving its `with` block) ends the iteration, from any thread.

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyStopAsyncIteration, PyStopIteration};
use pyo3::prelude::*;
use tokio::sync::{watch, Mutex};

use crate::args;
use crate::core::Core;
use crate::runtime::{block_on, drop_in_runtime, pid, run};
use crate::signal::Received;

/// The Rust listener, shared by the calls in flight on it.
struct Shared {
    /// `None` once closed.
    listener: Mutex<Option<latchkey::Listener>>,
    /// Set by `close()`: a receive in flight returns None at once.
    closed: watch::Sender<bool>,
    /// The process that subscribed: in a forked child the subscriptions
    /// are the parent's.
    owner: u32,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(listener) = self.listener.get_mut().take() {
            drop_in_runtime(listener, self.owner);
        }
    }
}

/// Subscribes to `names` (or glob `patterns`) and returns the listener.
pub(crate) async fn open(
    core: Arc<Core>,
    names: Vec<Vec<u8>>,
    patterns: bool,
    asyncio: bool,
) -> latchkey::Result<Listener> {
    let client = core.client().await?;
    let listener = if patterns {
        client.listen_patterns(names).await?
    } else {
        client.listen(names).await?
    };
    Ok(Listener {
        shared: Arc::new(Shared {
            listener: Mutex::new(Some(listener)),
            closed: watch::channel(false).0,
            owner: pid(),
        }),
        asyncio,
    })
}

/// The next signal within `wait` (`None`: as long as it takes); `None`
/// when it timed out or the listener was closed.
async fn receive(
    shared: Arc<Shared>,
    wait: Option<Duration>,
) -> latchkey::Result<Option<Received>> {
    if shared.owner != pid() {
        return Err(latchkey::Error::InvalidInput(
            "this listener was opened by the parent process: a listener does not cross os.fork()"
                .into(),
        ));
    }
    let mut closed = shared.closed.subscribe();
    let mut held = shared.listener.lock().await;
    let Some(listener) = held.as_mut() else {
        return Ok(None);
    };
    let next = async {
        match wait {
            Some(wait) => match listener.recv_timeout(wait).await {
                Ok(signal) => Ok(Some(Received(signal))),
                Err(latchkey::Error::WaitTimedOut { .. }) => Ok(None),
                Err(e) => Err(e),
            },
            None => Ok(Some(Received(listener.recv().await))),
        }
    };
    // `recv` is cancel safe: a signal that arrives as `close` wins is kept.
    tokio::select! {
        got = next => got,
        _ = closed.wait_for(|closed| *closed) => Ok(None),
    }
}

/// The next signal for `async for`: the end of the iteration once closed.
struct Next(Option<Received>);

impl<'py> IntoPyObject<'py> for Next {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        match self.0 {
            Some(signal) => Ok(signal.into_pyobject(py)?.into_any()),
            None => Err(PyStopAsyncIteration::new_err(())),
        }
    }
}

/// Subscriptions to signal names, kept between receives: `recv(timeout)`,
/// iteration, `close()`. Made by `Client.listen` / `AsyncClient.listen`.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct Listener {
    shared: Arc<Shared>,
    asyncio: bool,
}

#[pymethods]
impl Listener {
    /// The next signal, waiting at most `timeout` seconds (None: as long
    /// as it takes); None when it timed out or the listener was closed.
    #[pyo3(signature = (timeout = None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let wait = args::wait(py, timeout)?;
        run(
            py,
            self.asyncio,
            "Listener.recv",
            receive(self.shared.clone(), wait),
        )
    }

    /// A signal that has already arrived and was not yet received, without
    /// waiting; None if there is none (or a receive is in flight).
    fn try_recv(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let Ok(mut held) = self.shared.listener.try_lock() else {
            return Ok(None);
        };
        match held.as_mut().and_then(|l| l.try_recv()) {
            Some(signal) => Ok(Some(
                Received(signal).into_pyobject(py)?.into_any().unbind(),
            )),
            None => Ok(None),
        }
    }

    /// Whether a server has confirmed the subscriptions (False while the
    /// connection is down: signals sent then are not heard).
    #[getter]
    fn subscribed(&self) -> bool {
        match self.shared.listener.try_lock() {
            Ok(held) => held.as_ref().is_some_and(|l| l.is_subscribed()),
            // A receive in flight holds it: it is open.
            Err(_) => true,
        }
    }

    /// Unsubscribes; a receive in flight returns None, iteration ends.
    /// Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.closed.send_replace(true);
        let shared = self.shared.clone();
        block_on(py, async move {
            let taken = shared.listener.lock().await.take();
            drop(taken);
            Ok(())
        })
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if self.asyncio {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "an AsyncClient's listener: use `async for`",
            ));
        }
        match block_on(py, receive(self.shared.clone(), None))? {
            Some(signal) => Ok(signal.into_pyobject(py)?.into_any().unbind()),
            None => Err(PyStopIteration::new_err(())),
        }
    }

    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let shared = self.shared.clone();
        crate::runtime::awaitable(py, "Listener.__anext__", async move {
            receive(shared, None).await.map(Next)
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _trace: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __aenter__<'py>(slf: Py<Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::runtime::awaitable(py, "Listener.__aenter__", async move { Ok(slf) })
    }

    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _trace: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.shared.closed.send_replace(true);
        let shared = self.shared.clone();
        crate::runtime::awaitable(py, "Listener.__aexit__", async move {
            let taken = shared.listener.lock().await.take();
            drop(taken);
            Ok(false)
        })
    }
}
