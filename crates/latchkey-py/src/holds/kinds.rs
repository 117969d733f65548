//! The leaf classes of every kind of hold, blocking and asyncio, and the
//! calls only one kind has: a permit's count, several locks' names and
//! tokens, a leadership's term, value and `proclaim`.

use std::time::UNIX_EPOCH;

use latchkey::{Ownership, PermitGuard, RwAccess, RwGuard};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::class::Hold;
use super::{Held, Taken};
use crate::args;
use crate::recipes::twins;
use crate::runtime::{run, Make, Mode};

twins!(Hold => LockGuard, AsyncLockGuard; lock_guard);
twins!(PermitBase => Permit, AsyncPermit; permit);
twins!(MultiBase => MultiGuard, AsyncMultiGuard; multi_guard);
twins!(LeadingBase => Leadership, AsyncLeadership; leadership);

/// What a hold is of, for its class.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Lock,
    /// A semaphore's permits, or a read-write lock's read or write hold.
    Permit,
    /// Several locks at once.
    Multi,
    Leadership,
}

/// The Python object of a hold just taken, once the call is done.
pub(crate) fn made(taken: Taken, kind: Kind, mode: Mode) -> Make {
    Make::new(move |py| {
        let ours = taken.keep(py)?;
        let hold = |what| Hold { ours, mode, what };
        match kind {
            Kind::Lock => lock_guard(py, hold("lock").into(), mode),
            Kind::Permit => permit(
                py,
                PyClassInitializer::from(hold("hold")).add_subclass(PermitBase {}),
                mode,
            ),
            Kind::Multi => multi_guard(
                py,
                PyClassInitializer::from(hold("locks")).add_subclass(MultiBase {}),
                mode,
            ),
            Kind::Leadership => leadership(
                py,
                PyClassInitializer::from(hold("leadership")).add_subclass(LeadingBase {}),
                mode,
            ),
        }
    })
}

/// `op` on the hold as the guard type `G`, if it is one and still held.
fn as_guard<G: 'static, R>(hold: &Hold, gone: R, op: impl FnOnce(&G) -> R) -> R {
    hold.ours
        .now(None, |h: &dyn Held| h.as_any().downcast_ref::<G>().map(op))
        .unwrap_or(gone)
}

/// A semaphore's permit (or `k` of them), or a read-write lock's hold.
#[pyclass(module = "latchkey._native", name = "_Permit", extends = Hold, subclass, frozen)]
pub(crate) struct PermitBase {}

#[pymethods]
impl PermitBase {
    /// How many permits it holds (1 for a read or write hold).
    #[getter]
    fn permits(slf: PyRef<'_, Self>) -> u32 {
        as_guard::<PermitGuard, _>(slf.as_super(), 1, |g| g.permits())
    }

    /// `"read"` or `"write"` for a read-write lock's hold, else None.
    #[getter]
    fn access(slf: PyRef<'_, Self>) -> Option<&'static str> {
        as_guard::<RwGuard, _>(slf.as_super(), None, |g| {
            Some(match g.access() {
                RwAccess::Read => "read",
                RwAccess::Write => "write",
            })
        })
    }
}

/// Several locks held at once (`lock_all`): every one or none.
#[pyclass(module = "latchkey._native", name = "_MultiGuard", extends = Hold, subclass, frozen)]
pub(crate) struct MultiBase {}

#[pymethods]
impl MultiBase {
    /// The names, in the order given.
    #[getter]
    fn names(slf: PyRef<'_, Self>, py: Python<'_>) -> Vec<Py<PyAny>> {
        let hold = slf.as_super();
        let names: Vec<Vec<u8>> = as_guard::<latchkey::MultiGuard, _>(hold, Vec::new(), |g| {
            g.names().map(<[u8]>::to_vec).collect()
        });
        names
            .iter()
            .map(|n| hold.ours.name.like(n).to_py(py))
            .collect()
    }

    /// The fencing token of the lock called `name` (issued as
    /// `fencing_token()` issues one).
    fn fencing_token_of(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let name = args::name(py, name)?;
        let hold = slf.as_super();
        let call = hold.ours.call(move |h| {
            Box::pin(async move {
                match h.as_any().downcast_ref::<latchkey::MultiGuard>() {
                    Some(g) => g.fencing_token_of(&name).await,
                    None => Err(latchkey::Error::Unsupported(
                        "fencing_token_of: not several locks",
                    )),
                }
            })
        });
        run(py, hold.mode, "MultiGuard.fencing_token_of", call)
    }

    /// Which lock was lost (a round trip to each), or None while all are held.
    fn lost_lock(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let hold = slf.as_super();
        let call = hold.ours.call(|h| {
            Box::pin(async move {
                match h.as_any().downcast_ref::<latchkey::MultiGuard>() {
                    Some(g) => g.lost_lock().await,
                    None => Err(latchkey::Error::Unsupported("lost_lock: not several locks")),
                }
            })
        });
        let like = hold.ours.name.clone();
        run(py, hold.mode, "MultiGuard.lost_lock", async move {
            let lost = call.await?;
            Ok(Make::new(move |py| {
                Ok(lost.map_or(py.None(), |n| like.like(&n).to_py(py)))
            }))
        })
    }
}

/// Our leadership: renewed by its watchdog; `resign()` (or leaving a
/// `with` block) gives it up. Its term is its fencing token.
#[pyclass(module = "latchkey._native", name = "_Leadership", extends = Hold, subclass, frozen)]
pub(crate) struct LeadingBase {}

#[pymethods]
impl LeadingBase {
    /// Our term: greater than every earlier leader's (the fencing token).
    #[getter]
    fn term(slf: PyRef<'_, Self>) -> u64 {
        slf.as_super().ours.kept.issued_fencing_token().unwrap_or(0)
    }

    /// When we became leader: seconds since the epoch (the server's clock).
    #[getter]
    fn since(slf: PyRef<'_, Self>) -> f64 {
        as_guard::<latchkey::Leadership, _>(slf.as_super(), 0.0, |g| {
            g.since()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        })
    }

    /// The value we lead with now (None once resigned).
    #[getter]
    fn value<'py>(slf: PyRef<'py, Self>, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        as_guard::<latchkey::Leadership, _>(slf.as_super(), None, |g| Some(g.value()))
            .map(|v| PyBytes::new(py, &v))
    }

    /// Whether we lead: `is_held()`.
    fn is_leader(slf: PyRef<'_, Self>) -> bool {
        slf.as_super().ours.is_held()
    }

    /// Changes our value: True if we still led.
    fn proclaim(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let value = args::name(py, value)?;
        let hold = slf.as_super();
        let call = hold.ours.call(move |h| {
            Box::pin(async move {
                match h.as_any().downcast_ref::<latchkey::Leadership>() {
                    Some(g) => Ok(g.proclaim(&value).await? == Ownership::Owned),
                    None => Err(latchkey::Error::Unsupported("proclaim: not a leadership")),
                }
            })
        });
        run(py, hold.mode, "Leadership.proclaim", call)
    }

    /// Resigns: `release()`.
    fn resign(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let hold = slf.as_super();
        let releasing = hold.ours.release();
        run(py, hold.mode, "Leadership.resign", async move {
            Ok(releasing.await? == Some(Ownership::Owned))
        })
    }
}
