//! Leader election: `Election`/`AsyncElection`, its holds
//! (`Leadership`/`AsyncLeadership`, holds/kinds.rs), `Observer`/
//! `AsyncObserver`, and `Leader`, a leader as read.

use std::sync::Arc;
use std::time::UNIX_EPOCH;

use latchkey::Leader;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::{recipe_class, twins};
use crate::args::{self};
use crate::holds::kinds::{made, Kind};
use crate::holds::Taken;
use crate::runtime::{run, Make, Mode};

recipe_class! {
    /// Candidates campaign until one leads.
    ElectionBase("_Election") of latchkey::Election => Election, AsyncElection;
    shows {}
    keeps {}
}

/// A leader as read or announced: `value`, `term`, `since` (seconds since
/// the epoch, the server's clock).
#[pyclass(module = "latchkey._native", name = "Leader", frozen, get_all)]
pub(crate) struct LeaderInfo {
    value: Py<PyBytes>,
    term: u64,
    since: f64,
}

#[pymethods]
impl LeaderInfo {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<latchkey.Leader term={} value={:?} since={:.3}>",
            self.term,
            String::from_utf8_lossy(self.value.as_bytes(py)),
            self.since
        )
    }
}

/// The Python `Leader` of `leader`, or None.
fn leader_info(leader: Option<Leader>) -> Make {
    Make::new(move |py| {
        let Some(l) = leader else {
            return Ok(py.None());
        };
        let since = l
            .since
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let value = PyBytes::new(py, &l.value).unbind();
        Ok(Py::new(
            py,
            LeaderInfo {
                value,
                term: l.term,
                since,
            },
        )?
        .into_any())
    })
}

#[pymethods]
impl ElectionBase {
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
        let until = args::deadline(args::wait(py, timeout)?);
        let (recipe, name, mode) = (self.recipe.clone(), self.name.clone(), self.mode);
        run(py, mode, "Election.campaign", async move {
            let core = recipe.core.clone();
            let leadership = recipe.get().await?.campaign_until(value, until).await?;
            Ok(made(
                Taken::of(leadership, &name, &core),
                Kind::Leadership,
                mode,
            ))
        })
    }

    /// One try: a leadership, or None when someone else leads.
    fn try_campaign(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let value = args::name(py, value)?;
        let (recipe, name, mode) = (self.recipe.clone(), self.name.clone(), self.mode);
        run(py, mode, "Election.try_campaign", async move {
            let core = recipe.core.clone();
            let leadership = recipe.get().await?.try_campaign(value).await?;
            Ok(leadership.map(|l| made(Taken::of(l, &name, &core), Kind::Leadership, mode)))
        })
    }

    /// The leader now, or None.
    fn leader(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.recipe
            .run(py, self.mode, "Election.leader", move |recipe| async move {
                Ok(leader_info(recipe.leader().await?))
            })
    }

    /// An observer of every change of leader.
    fn observe(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (recipe, mode) = (self.recipe.clone(), self.mode);
        run(py, mode, "Election.observe", async move {
            let observer = Arc::new(tokio::sync::Mutex::new(
                recipe.get().await?.observe().await?,
            ));
            Ok(Make::new(move |py| {
                observer_class(py, ObserverBase { observer, mode }.into(), mode)
            }))
        })
    }
}

/// Follows every change of leader.
#[pyclass(module = "latchkey._native", name = "_Observer", subclass, frozen)]
pub(crate) struct ObserverBase {
    observer: Arc<tokio::sync::Mutex<latchkey::Observer>>,
    mode: Mode,
}

twins!(ObserverBase => Observer, AsyncObserver; observer_class);

#[pymethods]
impl ObserverBase {
    /// The next leader (None: nobody leads now), at most `timeout` seconds;
    /// raises `WaitTimedOut`.
    #[pyo3(signature = (timeout = None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let wait = args::wait(py, timeout)?.unwrap_or(args::FOREVER);
        let observer = self.observer.clone();
        run(py, self.mode, "Observer.next", async move {
            let mut observer = observer.lock().await;
            let leader = tokio::time::timeout(wait, observer.next())
                .await
                .map_err(|_| latchkey::Error::WaitTimedOut {
                    name: "election observer".into(),
                    waited: wait,
                })??;
            Ok(leader_info(leader))
        })
    }

    /// How many changes were missed (the observer fell behind).
    #[getter]
    fn missed(&self) -> u64 {
        self.observer.try_lock().map(|o| o.missed()).unwrap_or(0)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(format!(
            "<latchkey.{} missed={}>",
            slf.get_type().name()?,
            slf.get().missed()
        ))
    }
}
