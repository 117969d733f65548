//! Every call into the Rust API of an election (`latchkey::Election`,
//! `Leadership`, `Observer`), and its Python classes.

use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use latchkey::{Leader, Leadership};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::args;
use crate::core::Core;
use crate::hold::Holding;
use crate::runtime::{awaitable, block_on, run};

crate::hold::hold_surface!(Leadership, {
    fn value(&self) -> Option<Vec<u8>> {
        Some(Leadership::value(self))
    }
    fn proclaim(&self, value: Vec<u8>) -> crate::hold::Answer<'_, bool> {
        Box::pin(async move {
            Ok(Leadership::proclaim(self, value).await? == latchkey::Ownership::Owned)
        })
    }
});

pub(crate) struct ElectionSpec {
    pub(crate) core: Arc<Core>,
    pub(crate) name: Vec<u8>,
    pub(crate) ttl: Duration,
}

impl ElectionSpec {
    pub(crate) fn build(&self, client: &latchkey::Client) -> latchkey::Result<latchkey::Election> {
        client.election(&self.name, self.ttl)
    }

    async fn election(&self) -> latchkey::Result<latchkey::Election> {
        let client = self.core.clone().client().await?;
        self.build(&client)
    }
}

/// A leader as read or announced: `value`, `term`, `since` (seconds since
/// the epoch, the server's clock).
#[pyclass(module = "latchkey._native", name = "Leader", frozen, get_all)]
pub(crate) struct LeaderInfo {
    value: Py<PyBytes>,
    term: u64,
    since: f64,
}

fn leader_info(leader: Option<Leader>) -> Option<LeaderInfoParts> {
    leader.map(|l| LeaderInfoParts {
        value: l.value,
        term: l.term,
        since: l
            .since
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
    })
}

/// A `LeaderInfo` before it meets the GIL.
pub(crate) struct LeaderInfoParts {
    value: Vec<u8>,
    term: u64,
    since: f64,
}

impl<'py> IntoPyObject<'py> for LeaderInfoParts {
    type Target = LeaderInfo;
    type Output = Bound<'py, LeaderInfo>;
    type Error = PyErr;
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        Bound::new(
            py,
            LeaderInfo {
                value: PyBytes::new(py, &self.value).unbind(),
                term: self.term,
                since: self.since,
            },
        )
    }
}

#[pymethods]
impl LeaderInfo {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<latchkey.LeaderInfo term={} value={:?}>",
            self.term,
            String::from_utf8_lossy(self.value.as_bytes(py))
        )
    }
}

/// Candidates campaign until one leads.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct Election {
    pub(crate) spec: Arc<ElectionSpec>,
    pub(crate) asyncio: bool,
}

/// Our leadership: renewed by its watchdog; `resign()` (or leaving a
/// `with` block) gives it up.
#[pyclass(module = "latchkey._native", name = "Leadership", frozen, weakref)]
pub(crate) struct LeadershipHold {
    holding: Arc<Holding>,
    asyncio: bool,
}

/// Follows every change of leader.
#[pyclass(module = "latchkey._native", frozen)]
pub(crate) struct Observer {
    observer: Arc<tokio::sync::Mutex<latchkey::Observer>>,
    asyncio: bool,
}

#[pymethods]
impl Election {
    /// Campaigns with `value` until we lead, at most `timeout` seconds;
    /// raises `WaitTimedOut`.
    #[pyo3(signature = (value, timeout = None))]
    fn campaign(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let value = args::name(py, value)?;
        let deadline = args::wait(py, timeout)?.map(|w| Instant::now() + w);
        let (spec, asyncio) = (self.spec.clone(), self.asyncio);
        run(py, asyncio, "Election.campaign", async move {
            let election = spec.election().await?;
            let leadership = match deadline {
                Some(deadline) => election.campaign_until(value, deadline).await?,
                None => election.campaign(value).await?,
            };
            Ok(LeadershipHold {
                holding: Holding::new(Box::new(leadership), &spec.core),
                asyncio,
            })
        })
    }

    /// One try: a leadership, or None when someone else leads.
    fn try_campaign(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let value = args::name(py, value)?;
        let (spec, asyncio) = (self.spec.clone(), self.asyncio);
        run(py, asyncio, "Election.try_campaign", async move {
            let leadership = spec.election().await?.try_campaign(value).await?;
            Ok(leadership.map(|l| LeadershipHold {
                holding: Holding::new(Box::new(l), &spec.core),
                asyncio,
            }))
        })
    }

    /// The leader now, or None.
    fn leader(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let spec = self.spec.clone();
        run(py, self.asyncio, "Election.leader", async move {
            Ok(leader_info(spec.election().await?.leader().await?))
        })
    }

    /// An observer of every change of leader.
    fn observe(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (spec, asyncio) = (self.spec.clone(), self.asyncio);
        run(py, asyncio, "Election.observe", async move {
            let observer = spec.election().await?.observe().await?;
            Ok(Observer {
                observer: Arc::new(tokio::sync::Mutex::new(observer)),
                asyncio,
            })
        })
    }
}

#[pymethods]
impl LeadershipHold {
    /// Our term: greater than every earlier leader's (a fencing token).
    #[getter]
    fn term(&self) -> Option<u64> {
        self.holding.fencing_token
    }

    /// The value we lead with now (None once resigned).
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.holding.value().map(|v| PyBytes::new(py, &v))
    }

    #[getter]
    fn token(&self) -> String {
        self.holding.token.clone()
    }

    #[getter]
    fn deadline(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.holding
            .deadline()
            .map(|at| crate::lock_py::monotonic(py, at))
            .transpose()
    }

    fn is_leader(&self) -> bool {
        self.holding.is_held()
    }

    #[getter]
    fn lost(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.holding.lost_event(py, self.asyncio)
    }

    /// Changes our value: True if we still led.
    fn proclaim(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let value = args::name(py, value)?;
        run(
            py,
            self.asyncio,
            "Leadership.proclaim",
            self.holding.clone().proclaim(value),
        )
    }

    /// Resigns: True if we led to the end (idempotent).
    fn resign(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        run(
            py,
            self.asyncio,
            "Leadership.resign",
            self.holding.clone().release(),
        )
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        block_on(py, self.holding.clone().release())?;
        Ok(false)
    }

    fn __aenter__<'py>(slf: Py<Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, "Leadership.__aenter__", async move { Ok(slf) })
    }

    #[pyo3(signature = (*_exc))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc: &Bound<'_, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let resigning = self.holding.clone().release();
        awaitable(py, "Leadership.__aexit__", async move {
            resigning.await?;
            Ok(false)
        })
    }
}

#[pymethods]
impl Observer {
    /// The next leader (None: nobody leads now), at most `timeout` seconds;
    /// raises `WaitTimedOut`.
    #[pyo3(signature = (timeout = None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let wait = args::wait(py, timeout)?;
        let observer = self.observer.clone();
        run(py, self.asyncio, "Observer.next", async move {
            let mut observer = observer.lock().await;
            let next = observer.next();
            let leader = match wait {
                None => next.await?,
                Some(w) => tokio::time::timeout(w, next).await.map_err(|_| {
                    latchkey::Error::WaitTimedOut {
                        name: "election observer".into(),
                        waited: w,
                    }
                })??,
            };
            Ok(leader_info(leader))
        })
    }

    /// How many changes were missed (the observer fell behind).
    #[getter]
    fn missed(&self) -> u64 {
        self.observer.try_lock().map(|o| o.missed()).unwrap_or(0)
    }
}
