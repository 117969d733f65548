//! `client.listen(names)`: a `Listener` that keeps its subscriptions, so
//! signals sent between two receives are not lost (a `wait` per signal
//! leaves a gap). Iterable in both APIs (`for` / `async for`); `close()`
//! (or leaving its `with` block) ends the iteration, from any thread.

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyStopAsyncIteration, PyStopIteration};
use pyo3::prelude::*;
use tokio::sync::{watch, Mutex};

use super::Received;
use crate::args;
use crate::clients::core::Core;
use crate::recipes::twins;
use crate::runtime::{awaitable, block_on, drop_in_runtime, pid, run, Make, Mode};

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
    mode: Mode,
) -> latchkey::Result<Make> {
    let client = core.connect().await?;
    let listener = if patterns {
        client.listen_patterns(names).await?
    } else {
        client.listen(names).await?
    };
    let base = ListenerBase {
        shared: Arc::new(Shared {
            listener: Mutex::new(Some(listener)),
            closed: watch::channel(false).0,
            owner: pid(),
        }),
        mode,
    };
    Ok(Make::new(move |py| listener_class(py, base.into(), mode)))
}

/// The next signal within `wait` (`None`: as long as it takes); `None`
/// when the listener was closed; `WaitTimedOut` when the time ran out.
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
            Some(wait) => Ok(Some(Received(listener.recv_timeout(wait).await?))),
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
#[pyclass(module = "latchkey._native", name = "_Listener", subclass, frozen)]
pub(crate) struct ListenerBase {
    shared: Arc<Shared>,
    mode: Mode,
}

twins!(ListenerBase => Listener, AsyncListener; listener_class);

impl ListenerBase {
    /// Closes now; what a receive in flight holds is dropped when it ends.
    fn closing(&self) -> impl std::future::Future<Output = latchkey::Result<()>> + Send + 'static {
        self.shared.closed.send_replace(true);
        let shared = self.shared.clone();
        async move {
            let taken = shared.listener.lock().await.take();
            drop(taken);
            Ok(())
        }
    }
}

#[pymethods]
impl ListenerBase {
    /// The next signal, waiting at most `timeout` seconds (None: as long
    /// as it takes); raises `WaitTimedOut` when the time ran out; None
    /// once the listener is closed.
    #[pyo3(signature = (timeout = None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let wait = args::wait(py, timeout)?;
        run(
            py,
            self.mode,
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
    /// Idempotent; from any thread.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        block_on(py, self.closing())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let closed = *slf.get().shared.closed.borrow();
        Ok(format!(
            "<latchkey.{} closed={closed}>",
            slf.get_type().name()?
        ))
    }
}

#[pymethods]
impl Listener {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match block_on(py, receive(slf.as_super().shared.clone(), None))? {
            Some(signal) => Ok(signal.into_pyobject(py)?.into_any().unbind()),
            None => Err(PyStopIteration::new_err(())),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        _kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _trace: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        block_on(py, slf.as_super().closing())
    }
}

#[pymethods]
impl AsyncListener {
    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(slf: PyRef<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let shared = slf.as_super().shared.clone();
        awaitable(py, "AsyncListener.__anext__", async move {
            receive(shared, None).await.map(Next)
        })
    }

    fn __aenter__<'py>(slf: Py<Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, "AsyncListener.__aenter__", async move { Ok(slf) })
    }

    fn __aexit__<'py>(
        slf: PyRef<'py, Self>,
        py: Python<'py>,
        _kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _trace: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, "AsyncListener.__aexit__", slf.as_super().closing())
    }
}
