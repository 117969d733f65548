//! A lock (plain, fair or kept while idle, on one Redis or a Redlock) and
//! several locks at once: `Lock`/`AsyncLock`, `MultiLock`/`AsyncMultiLock`
//! over one base class and the library's one way to acquire
//! (`latchkey::Acquire`, which the semaphore shares).

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey::Acquire;
use pyo3::prelude::*;

use super::options::LeaseOptions;
use super::{recipe_class, twins, Made};
use crate::args::{self, Name};
use crate::clients::core::Core;
use crate::holds::kinds::{made, Kind};
use crate::holds::Taken;
use crate::runtime::Mode;

/// A hold of `recipe`, waiting until `until` (`acquire`: raises
/// `WaitTimedOut` after it), or one try (None: a hold, or None when busy).
pub(crate) fn take<T: Acquire + Clone>(
    py: Python<'_>,
    recipe: &Arc<Made<T>>,
    name: &Name,
    (kind, mode): (Kind, Mode),
    until: Option<Instant>,
) -> PyResult<Py<PyAny>> {
    let (core, name) = (recipe.core.clone(), name.clone());
    let qualname = match until {
        Some(_) => "Lock.acquire",
        None => "Lock.try_acquire",
    };
    recipe.run(py, mode, qualname, move |recipe| async move {
        let hold = match until {
            // A wait ends when its client is closed.
            Some(until) => {
                tracing::debug!(target: "latchkey::python", name = %name.shown(), "waiting");
                match core.unless_closed(recipe.take_until(until.into())).await {
                    Err(e @ latchkey::Error::WaitTimedOut { .. }) => {
                        tracing::info!(target: "latchkey::python", name = %name.shown(), error = %e, "wait timed out");
                        return Err(e);
                    }
                    got => Some(got?),
                }
            }
            None => recipe.try_take().await?,
        };
        if let Err(closed) = core.check_open() {
            // Taken as the client closed: given back, not kept.
            if let Some(hold) = hold {
                let _ = hold.release().await;
            }
            return Err(closed);
        }
        Ok(hold.map(|hold| made(Taken::new(hold, &name, &core), kind, mode)))
    })
}

recipe_class! {
    /// A lock (`Client.lock`, `Redlock.lock`) or several (`Client.lock_all`,
    /// whose name is theirs joined by `+`).
    LockBase("_Lock") of Arc<dyn Acquire> => Lock, AsyncLock;
    shows {
        /// Seconds each hold lasts unless renewed.
        ttl: Duration,
    }
    keeps { kind: Kind }
}

twins!(LockBase => MultiLock, AsyncMultiLock; multi_lock_class);

/// How a lock is made, from a client's keywords.
pub(crate) struct LockSpec {
    pub(crate) ttl: Duration,
    pub(crate) lease: LeaseOptions,
    pub(crate) fair: bool,
    /// `Some(idle)`: a released hold is kept while idle (`cached=`).
    pub(crate) cached: Option<Duration>,
}

/// `client.lock(name, ttl, …)`.
pub(crate) fn lock(
    py: Python<'_>,
    core: &Arc<Core>,
    name: Name,
    spec: LockSpec,
    mode: Mode,
) -> PyResult<Py<PyAny>> {
    let ttl = spec.ttl;
    LockBase::make(py, core, name, ttl, Kind::Lock, mode, move |c, bytes| {
        let mut lock = spec.lease.apply(c.lock(bytes, spec.ttl)?)?;
        if spec.fair {
            lock = lock.fair()?;
        }
        Ok(match spec.cached {
            Some(idle) => Arc::new(lock.with_caching(idle)?) as Arc<dyn Acquire>,
            None => Arc::new(lock),
        })
    })
}

/// `client.lock_all(names, ttl, …)`: every lock or none.
pub(crate) fn lock_all(
    py: Python<'_>,
    core: &Arc<Core>,
    names: Vec<Name>,
    ttl: Duration,
    lease: LeaseOptions,
    mode: Mode,
) -> PyResult<Py<PyAny>> {
    let bytes: Vec<Vec<u8>> = names.iter().map(|n| n.bytes.clone()).collect();
    let recipe = Made::new(py, core, move |c| {
        Ok(Arc::new(lease.apply(c.lock_all(&bytes, ttl)?)?) as Arc<dyn Acquire>)
    })?;
    let joined = names
        .iter()
        .map(|n| n.bytes.as_slice())
        .collect::<Vec<_>>()
        .join(&b'+');
    let name = match names.first() {
        Some(first) => first.like(&joined),
        None => Name {
            bytes: joined,
            text: true,
        },
    };
    let base = LockBase {
        recipe,
        name,
        ttl,
        mode,
        kind: Kind::Multi,
    };
    multi_lock_class(py, base.into(), mode)
}

#[pymethods]
impl LockBase {
    /// Waits until the lock is ours, at most `timeout` seconds (None: as
    /// long as it takes); raises `WaitTimedOut` when it stays busy.
    #[pyo3(signature = (timeout = None))]
    fn acquire(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let until = Some(args::deadline(args::wait(py, timeout)?));
        take(py, &self.recipe, &self.name, (self.kind, self.mode), until)
    }

    /// One try: a guard, or None when someone else holds the lock.
    fn try_acquire(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        take(py, &self.recipe, &self.name, (self.kind, self.mode), None)
    }

    /// Whether anyone holds the lock now (a lock kept idle by `cached=`
    /// included): one round trip, true the moment it is asked only.
    fn locked(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (core, name, kind) = (self.recipe.core.clone(), self.name.bytes.clone(), self.kind);
        crate::runtime::run(py, self.mode, "Lock.locked", async move {
            if matches!(kind, Kind::Multi) {
                return Err(latchkey::Error::Unsupported(
                    "locked(): several locks; ask each lock",
                ));
            }
            // A Redlock's client refuses the inspection (Unsupported).
            Ok(core.connect().await?.inspect(&name).await?.held)
        })
    }

    /// A lock made with `cached=`: gives its idle hold back to Redis now
    /// (True when one was kept); False for any other lock.
    fn give_back(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.recipe
            .run(py, self.mode, "Lock.give_back", move |recipe| async move {
                recipe.give_back().await
            })
    }
}
