//! `_Hold`: the Python base class of every hold, with what every hold
//! does (the surface of `latchkey::Guard`); kinds.rs adds each kind's own
//! calls and the blocking and asyncio leaf classes.

use std::time::{Duration, Instant};

use latchkey::Ownership;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

use super::lost::{lost_event, LostBase};
use super::Ours;
use crate::args;
use crate::runtime::{awaitable, block_on, run, Make, Mode};

/// A hold. Released by `release()` or by leaving its `with` (or `async
/// with`) block; one Python lets go of stays held by its client until the
/// client is closed or the interpreter exits.
#[pyclass(module = "latchkey._native", name = "_Hold", subclass, frozen, weakref)]
pub(crate) struct Hold {
    pub(crate) ours: Ours,
    pub(crate) mode: Mode,
    /// What it holds, for messages: "lock", "permit", "leadership", …
    pub(crate) what: &'static str,
}

/// `at` on Python's `time.monotonic()` clock (the same CLOCK_MONOTONIC as
/// Rust's `Instant` on Linux, read through Python to be sure).
pub(crate) fn monotonic(py: Python<'_>, at: Instant) -> PyResult<f64> {
    let now_py: f64 = py.import("time")?.call_method0("monotonic")?.extract()?;
    let now = Instant::now();
    let ahead = match at.checked_duration_since(now) {
        Some(ahead) => ahead.as_secs_f64(),
        None => -now.duration_since(at).as_secs_f64(),
    };
    Ok(now_py + ahead)
}

/// How long leaving a `with` block that raised tries to give the hold
/// back: the block's own exception is what matters then, and a Redis that
/// is down would otherwise hold it up until the hold's deadline.
const GIVE_BACK_WITHIN: Duration = Duration::from_millis(500);

/// The release at the end of a `with` block whose block raised: bounded
/// by `GIVE_BACK_WITHIN`; a failure is logged, not raised (the block's
/// exception propagates), and the key is left to its TTL (the library
/// tries once more in the background).
async fn give_back(
    name: String,
    releasing: latchkey::BoxFuture<'static, latchkey::Result<Option<Ownership>>>,
) -> latchkey::Result<()> {
    match tokio::time::timeout(GIVE_BACK_WITHIN, releasing).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(
            target: "latchkey::python",
            name = %name,
            error = %e,
            "the release at the end of a with block that raised failed: the hold is left to its TTL"
        ),
        Err(_) => tracing::warn!(
            target: "latchkey::python",
            name = %name,
            within = ?GIVE_BACK_WITHIN,
            "the release at the end of a with block that raised did not finish in time: the hold is left to its TTL"
        ),
    }
    Ok(())
}

impl Hold {
    /// The end of a `with` block: released, and `LockLost` raised when the
    /// hold turned out lost (or the program was told it was: `lost` fired,
    /// a cap reached) and the block raised nothing itself.
    fn exit_with(&self, found: Option<Ownership>, raised: bool) -> Make {
        let told = self.ours.kept.lost_reason().is_some();
        let lost = matches!(found, Some(o) if o != Ownership::Owned || told) && !raised;
        let message = lost.then(|| {
            let why = self
                .ours
                .kept
                .lost_reason()
                .map_or("it expired", |r| r.describe());
            format!(
                "{} {} was lost before its with block ended ({why}): the block ran unprotected",
                self.what,
                self.ours.name.shown()
            )
        });
        Make::new(move |py| match message {
            Some(message) => Err(crate::errors::raise(py, "LockLost", message)),
            None => Ok(py.None()),
        })
    }

    fn wrong_with(&self) -> PyErr {
        PyTypeError::new_err(match self.mode {
            Mode::Blocking => "a blocking Client's hold: use `with`, not `async with`",
            Mode::Asyncio => "an AsyncClient's hold: use `async with`, not `with`",
        })
    }
}

#[pymethods]
impl Hold {
    /// What it holds: the name as given (`str` or `bytes`; several locks'
    /// names joined by `+`).
    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyAny> {
        self.ours.name.to_py(py)
    }

    /// The owner token: what Redis keeps for the hold while it is ours.
    #[getter]
    fn token(&self) -> String {
        self.ours.kept.token().to_owned()
    }

    /// Seconds an acquisition or a renewal holds for.
    #[getter]
    fn ttl(&self) -> f64 {
        self.ours.kept.ttl().as_secs_f64()
    }

    /// Until when the hold may be assumed, on `time.monotonic()`'s clock
    /// (the last one once released): past it, it may be someone else's.
    #[getter]
    fn deadline(&self, py: Python<'_>) -> PyResult<f64> {
        monotonic(py, self.ours.kept.deadline())
    }

    /// Not known lost, not released, before the stop margin. Asks nobody.
    fn is_held(&self) -> bool {
        self.ours.is_held()
    }

    /// Set when the hold can no longer be proven ours.
    #[getter]
    fn lost(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let event = LostBase {
            lost: self.ours.lost_signal(),
            owner: self.ours.owner,
            mode: self.mode,
        };
        lost_event(py, event.into(), self.mode)
    }

    /// Why it was lost (`revoked`, `max-hold`, `expired`, `gone`,
    /// `taken-over`, `unreachable`), or None while it was not.
    #[getter]
    fn lost_reason(&self) -> Option<&'static str> {
        self.ours.kept.lost_reason().map(|r| r.as_str())
    }

    /// The hold's fencing token, greater than every earlier hold's: the
    /// one issued with it (`fencing=True`, a leadership's term), else
    /// issued now (one round trip, the first time).
    fn fencing_token(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let call = self.ours.call(|h| h.fencing_token());
        run(py, self.mode, "Hold.fencing_token", call)
    }

    /// Every fencing token of the hold (one per lock of several locks
    /// held at once), issued as `fencing_token()` issues one.
    fn fencing_tokens(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let call = self.ours.call(|h| h.fencing_tokens());
        run(py, self.mode, "Hold.fencing_tokens", call)
    }

    /// The fencing token if it was issued already, else None. Asks nobody.
    fn issued_fencing_token(&self) -> Option<u64> {
        self.ours.kept.issued_fencing_token()
    }

    /// Resets the TTL to `ttl` seconds from now: True if still ours (else
    /// the hold is marked lost).
    fn extend(&self, py: Python<'_>, ttl: f64) -> PyResult<Py<PyAny>> {
        let ttl = args::ttl(py, ttl)?;
        run(py, self.mode, "Hold.extend", self.ours.extend(ttl))
    }

    /// Releases if still ours: True when it was ours to the end, False
    /// when it was lost or released already (idempotent).
    fn release(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let releasing = self.ours.release();
        run(py, self.mode, "Hold.release", async move {
            Ok(releasing.await? == Some(Ownership::Owned))
        })
    }

    /// Gives the hold up without releasing it: it ends at its TTL, or by
    /// a release with the owner token returned.
    fn forget(&self, py: Python<'_>) -> PyResult<String> {
        block_on(py, self.ours.forget())
    }

    /// Waits until another process asks for the hold (`request_release`,
    /// a waiter made with `ask=True`), at most `timeout` seconds; raises
    /// `WaitTimedOut`. Nothing is taken away: letting go is up to us.
    #[pyo3(signature = (timeout = None))]
    fn release_requested(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let wait = args::wait(py, timeout)?.unwrap_or(args::FOREVER);
        let name = String::from_utf8_lossy(&self.ours.name.bytes).into_owned();
        let asked = self.ours.call(|h| h.release_requested());
        run(py, self.mode, "Hold.release_requested", async move {
            match tokio::time::timeout(wait, asked).await {
                Ok(asked) => asked,
                Err(_) => Err(latchkey::Error::WaitTimedOut { name, waited: wait }),
            }
        })
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        match slf.get().mode {
            Mode::Blocking => Ok(slf),
            Mode::Asyncio => Err(slf.get().wrong_with()),
        }
    }

    /// Releases; raises `LockLost` when the hold turned out lost and the
    /// block raised nothing.
    fn __exit__(
        &self,
        py: Python<'_>,
        kind: Option<&Bound<'_, PyType>>,
        _value: Option<&Bound<'_, PyAny>>,
        _trace: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        if self.mode == Mode::Asyncio {
            return Err(self.wrong_with());
        }
        if kind.is_some() {
            return block_on(py, give_back(self.ours.name.shown(), self.ours.release()));
        }
        let found = block_on(py, self.ours.release())?;
        self.exit_with(found, kind.is_some()).made(py).map(drop)
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if slf.get().mode == Mode::Blocking {
            return Err(slf.get().wrong_with());
        }
        let slf = slf.unbind();
        awaitable(py, "AsyncHold.__aenter__", async move { Ok(slf) })
    }

    /// As `__exit__`, a coroutine.
    fn __aexit__<'py>(
        slf: Bound<'py, Self>,
        py: Python<'py>,
        kind: Option<&Bound<'_, PyType>>,
        _value: Option<&Bound<'_, PyAny>>,
        _trace: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if slf.get().mode == Mode::Blocking {
            return Err(slf.get().wrong_with());
        }
        let raised = kind.is_some();
        let me = slf.unbind();
        if raised {
            let giving = give_back(me.get().ours.name.shown(), me.get().ours.release());
            return awaitable(py, "AsyncHold.__aexit__", async move {
                giving.await?;
                Ok(Make::new(|py| Ok(py.None())))
            });
        }
        let releasing = me.get().ours.release();
        awaitable(py, "AsyncHold.__aexit__", async move {
            let found = releasing.await?;
            Ok(me.get().exit_with(found, raised))
        })
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let me = slf.get();
        Ok(format!(
            "<latchkey.{} name={} held={} token={:?}>",
            slf.get_type().name()?,
            me.ours.name.shown(),
            me.ours.is_held(),
            me.ours.kept.token()
        ))
    }
}
