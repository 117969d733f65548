//! The factories of every primitive but the lock, and the signal calls,
//! for both clients (one macro, two `#[pymethods]` blocks: pyo3's
//! multiple-pymethods).

use std::sync::Arc;

use pyo3::prelude::*;

use crate::args;
use crate::barrier::{Barrier, BarrierSpec};
use crate::client_py::{AsyncClient, Client};
use crate::core::Core;
use crate::election::{Election, ElectionSpec};
use crate::errors::to_py;
use crate::fence::{FencedResource, FencedSpec};
use crate::latch::{Latch, LatchSpec};
use crate::runtime::run;
use crate::rwlock::{RwLock, RwLockSpec};
use crate::semaphore::{Semaphore, SemaphoreSpec};

/// `names`: one name, or a list or tuple of them.
fn names(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    if value.is_instance_of::<pyo3::types::PyList>()
        || value.is_instance_of::<pyo3::types::PyTuple>()
    {
        value.try_iter()?.map(|n| args::name(py, &n?)).collect()
    } else {
        Ok(vec![args::name(py, value)?])
    }
}

/// Checks a primitive's spec against the connected client (bad names,
/// TTLs and counts are refused where the primitive is made).
fn checked<S>(
    py: Python<'_>,
    core: &Arc<Core>,
    spec: S,
    build: impl Fn(&S, &latchkey::Client) -> latchkey::Result<()>,
) -> PyResult<Arc<S>> {
    if let Some(client) = core.current() {
        build(&spec, &client).map_err(|e| to_py(py, e))?;
    }
    Ok(Arc::new(spec))
}

/// The factories of every primitive but the lock, and signals: the same
/// for both clients, but for `asyncio` (what their calls return).
macro_rules! primitive_factories {
    ($class:ident, $asyncio:expr) => {
        #[pymethods]
        impl $class {
            /// At most `permits` holders of `name` at once, each for `ttl` seconds.
            #[pyo3(signature = (name, permits, ttl, *, watchdog = true, fencing = false))]
            fn semaphore(
                &self,
                py: Python<'_>,
                name: &Bound<'_, PyAny>,
                permits: &Bound<'_, PyAny>,
                ttl: f64,
                watchdog: bool,
                fencing: bool,
            ) -> PyResult<Semaphore> {
                let spec = SemaphoreSpec {
                    core: self.core.clone(),
                    name: args::name(py, name)?,
                    permits: args::count(py, "semaphore permits", permits)?,
                    ttl: args::ttl(py, ttl)?,
                    watchdog,
                    fencing,
                };
                let spec = checked(py, &self.core, spec, |s, c| s.build(c).map(drop))?;
                Ok(Semaphore {
                    spec,
                    asyncio: $asyncio,
                })
            }

            /// A phase-fair read-write lock; each hold lasts `ttl` seconds.
            #[pyo3(signature = (name, ttl, *, watchdog = true, fencing = false))]
            fn rwlock(
                &self,
                py: Python<'_>,
                name: &Bound<'_, PyAny>,
                ttl: f64,
                watchdog: bool,
                fencing: bool,
            ) -> PyResult<RwLock> {
                let spec = RwLockSpec {
                    core: self.core.clone(),
                    name: args::name(py, name)?,
                    ttl: args::ttl(py, ttl)?,
                    watchdog,
                    fencing,
                };
                let spec = checked(py, &self.core, spec, |s, c| s.build(c).map(drop))?;
                Ok(RwLock {
                    spec,
                    asyncio: $asyncio,
                })
            }

            /// A count-down latch kept for `ttl` seconds.
            #[pyo3(signature = (name, ttl = 3600.0))]
            fn latch(&self, py: Python<'_>, name: &Bound<'_, PyAny>, ttl: f64) -> PyResult<Latch> {
                let spec = LatchSpec {
                    core: self.core.clone(),
                    name: args::name(py, name)?,
                    ttl: args::ttl(py, ttl)?,
                };
                let spec = checked(py, &self.core, spec, |s, c| s.build(c).map(drop))?;
                Ok(Latch {
                    spec,
                    asyncio: $asyncio,
                })
            }

            /// A cyclic barrier of `parties`, kept `ttl` seconds after its last use.
            #[pyo3(signature = (name, parties, ttl = 3600.0))]
            fn barrier(
                &self,
                py: Python<'_>,
                name: &Bound<'_, PyAny>,
                parties: &Bound<'_, PyAny>,
                ttl: f64,
            ) -> PyResult<Barrier> {
                let spec = BarrierSpec {
                    core: self.core.clone(),
                    name: args::name(py, name)?,
                    parties: args::count(py, "barrier parties", parties)?,
                    ttl: args::ttl(py, ttl)?,
                };
                let spec = checked(py, &self.core, spec, |s, c| s.build(c).map(drop))?;
                Ok(Barrier {
                    spec,
                    asyncio: $asyncio,
                })
            }

            /// The election `name`; a leader's lease lasts `ttl` seconds, renewed.
            #[pyo3(signature = (name, ttl))]
            fn election(
                &self,
                py: Python<'_>,
                name: &Bound<'_, PyAny>,
                ttl: f64,
            ) -> PyResult<Election> {
                let spec = ElectionSpec {
                    core: self.core.clone(),
                    name: args::name(py, name)?,
                    ttl: args::ttl(py, ttl)?,
                };
                let spec = checked(py, &self.core, spec, |s, c| s.build(c).map(drop))?;
                Ok(Election {
                    spec,
                    asyncio: $asyncio,
                })
            }

            /// A value that refuses stale holders' writes (name it apart from its lock).
            fn fenced(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<FencedResource> {
                let spec = FencedSpec {
                    core: self.core.clone(),
                    name: args::name(py, name)?,
                };
                let spec = checked(py, &self.core, spec, |s, c| s.build(c).map(drop))?;
                Ok(FencedResource {
                    spec,
                    asyncio: $asyncio,
                })
            }

            /// Signals every process waiting on `name` now: how many heard it.
            #[pyo3(signature = (name, payload = None))]
            fn signal(
                &self,
                py: Python<'_>,
                name: &Bound<'_, PyAny>,
                payload: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<Py<PyAny>> {
                let name = args::name(py, name)?;
                let payload = payload
                    .map(|p| args::name(py, p))
                    .transpose()?
                    .unwrap_or_default();
                run(
                    py,
                    $asyncio,
                    "Client.signal",
                    crate::signal::signal(self.core.clone(), name, payload),
                )
            }

            /// Signals one waiter of `name`: whether one heard it.
            #[pyo3(signature = (name, payload = None))]
            fn signal_one(
                &self,
                py: Python<'_>,
                name: &Bound<'_, PyAny>,
                payload: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<Py<PyAny>> {
                let name = args::name(py, name)?;
                let payload = payload
                    .map(|p| args::name(py, p))
                    .transpose()?
                    .unwrap_or_default();
                run(
                    py,
                    $asyncio,
                    "Client.signal_one",
                    crate::signal::signal_one(self.core.clone(), name, payload),
                )
            }

            /// Subscribes to `names` (one name or a list; glob patterns
            /// with `patterns=True`) and returns a `Listener` that keeps
            /// the subscriptions between receives.
            #[pyo3(signature = (names, *, patterns = false))]
            fn listen(
                &self,
                py: Python<'_>,
                names: &Bound<'_, PyAny>,
                patterns: bool,
            ) -> PyResult<Py<PyAny>> {
                let names = self::names(py, names)?;
                run(
                    py,
                    $asyncio,
                    "Client.listen",
                    crate::listen::open(self.core.clone(), names, patterns, $asyncio),
                )
            }

            /// The first signal on `names` (one name or a list) within
            /// `timeout` seconds, or None.
            #[pyo3(signature = (names, timeout = None))]
            fn wait(
                &self,
                py: Python<'_>,
                names: &Bound<'_, PyAny>,
                timeout: Option<f64>,
            ) -> PyResult<Py<PyAny>> {
                let names = self::names(py, names)?;
                let wait = args::wait(py, timeout)?.unwrap_or(args::FOREVER);
                run(
                    py,
                    $asyncio,
                    "Client.wait",
                    crate::signal::wait(self.core.clone(), names, wait),
                )
            }
        }
    };
}

primitive_factories!(Client, false);
primitive_factories!(AsyncClient, true);
