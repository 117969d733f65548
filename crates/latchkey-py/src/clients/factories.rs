//! What a client makes: every recipe, in the client's mode (a blocking
//! client's `Lock`, an asyncio client's `AsyncLock`).

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::ClientBase;
use crate::args;
use crate::recipes::barrier::BarrierBase;
use crate::recipes::election::ElectionBase;
use crate::recipes::fence::FencedBase;
use crate::recipes::latch::LatchBase;
use crate::recipes::lock;
use crate::recipes::lock::LockSpec;
use crate::recipes::options::{no_more, take_bool, take_seconds, LeaseOptions};
use crate::recipes::rwlock::RwLockBase;
use crate::recipes::semaphore::SemaphoreBase;

/// `names`: one name, or a list or tuple of them.
pub(crate) fn names(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Vec<args::Name>> {
    if value.is_instance_of::<pyo3::types::PyList>()
        || value.is_instance_of::<pyo3::types::PyTuple>()
    {
        value.try_iter()?.map(|n| args::named(py, &n?)).collect()
    } else {
        Ok(vec![args::named(py, value)?])
    }
}

#[pymethods]
impl ClientBase {
    /// A lock called `name` (str or bytes) held for `ttl` seconds, renewed
    /// by a watchdog while held unless `watchdog=False`. `fencing=True`
    /// issues the fencing token with every acquisition; `fair=True` queues
    /// waiters in arrival order; `cached=idle` keeps a released hold up to
    /// `idle` seconds for the next acquire; `max_hold=` caps every hold;
    /// `ask=True` makes a waiter ask the holder to let go; `stop_margin=`
    /// is how long before the deadline `lost` fires; `hold_at_least=`
    /// keeps every hold that long even when released before.
    #[pyo3(signature = (name, ttl, **options))]
    fn lock(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        ttl: f64,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let lease = LeaseOptions::take(py, options)?;
        let (mut fair, mut cached) = (false, None);
        if let Some(options) = options {
            fair = take_bool(options, "fair", false)?;
            cached = take_seconds(py, options, "cached")?;
        }
        no_more("lock", options)?;
        let spec = LockSpec {
            ttl: args::ttl(py, ttl)?,
            lease,
            fair,
            cached,
        };
        lock::lock(py, &self.core, args::named(py, name)?, spec, self.mode)
    }

    /// Several locks held all at once or not at all, whatever order other
    /// callers name them in; the lease keywords of `lock`.
    #[pyo3(signature = (names, ttl, **options))]
    fn lock_all(
        &self,
        py: Python<'_>,
        names: &Bound<'_, PyAny>,
        ttl: f64,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let lease = LeaseOptions::take(py, options)?;
        no_more("lock_all", options)?;
        let names = self::names(py, names)?;
        lock::lock_all(py, &self.core, names, args::ttl(py, ttl)?, lease, self.mode)
    }

    /// At most `permits` holders of `name` at once, each for `ttl` seconds;
    /// the lease keywords of `lock`.
    #[pyo3(signature = (name, permits, ttl, **options))]
    fn semaphore(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        permits: &Bound<'_, PyAny>,
        ttl: f64,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let lease = LeaseOptions::take(py, options)?;
        no_more("semaphore", options)?;
        let permits = args::count(py, "semaphore permits", permits)?;
        let (name, ttl) = (args::named(py, name)?, args::ttl(py, ttl)?);
        SemaphoreBase::make(py, &self.core, name, permits, self.mode, move |c, n| {
            lease.apply(c.semaphore(n, permits, ttl)?)
        })
    }

    /// A phase-fair read-write lock; each hold lasts `ttl` seconds; the
    /// lease keywords of `lock`.
    #[pyo3(signature = (name, ttl, **options))]
    fn rwlock(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        ttl: f64,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let lease = LeaseOptions::take(py, options)?;
        no_more("rwlock", options)?;
        let (name, ttl) = (args::named(py, name)?, args::ttl(py, ttl)?);
        RwLockBase::make(py, &self.core, name, self.mode, move |c, n| {
            lease.apply(c.rwlock(n, ttl)?)
        })
    }

    /// A count-down latch kept for `ttl` seconds.
    #[pyo3(signature = (name, ttl = 3600.0))]
    fn latch(&self, py: Python<'_>, name: &Bound<'_, PyAny>, ttl: f64) -> PyResult<Py<PyAny>> {
        let (name, ttl) = (args::named(py, name)?, args::ttl(py, ttl)?);
        LatchBase::make(py, &self.core, name, self.mode, move |c, n| c.latch(n, ttl))
    }

    /// A cyclic barrier of `parties`, kept `ttl` seconds after its last use.
    #[pyo3(signature = (name, parties, ttl = 3600.0))]
    fn barrier(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        parties: &Bound<'_, PyAny>,
        ttl: f64,
    ) -> PyResult<Py<PyAny>> {
        let parties = args::count(py, "barrier parties", parties)?;
        let (name, ttl) = (args::named(py, name)?, args::ttl(py, ttl)?);
        BarrierBase::make(py, &self.core, name, parties, self.mode, move |c, n| {
            c.barrier(n, parties, ttl)
        })
    }

    /// The election `name`; a leader's lease lasts `ttl` seconds, renewed.
    fn election(&self, py: Python<'_>, name: &Bound<'_, PyAny>, ttl: f64) -> PyResult<Py<PyAny>> {
        let (name, ttl) = (args::named(py, name)?, args::ttl(py, ttl)?);
        ElectionBase::make(py, &self.core, name, self.mode, move |c, n| {
            c.election(n, ttl)
        })
    }

    /// A value that refuses stale holders' writes (name it apart from its lock).
    fn fenced(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let name = args::named(py, name)?;
        FencedBase::make(py, &self.core, name, self.mode, |c, n| c.fenced(n))
    }
}
