//! Arguments from Python: names (`str` or `bytes`) and seconds (`float`).

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::errors::{invalid, to_py};

/// A name given as `str` (its UTF-8 bytes) or `bytes`.
pub(crate) fn name(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if value.is_instance_of::<PyString>() {
        return Ok(value.extract::<String>()?.into_bytes());
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    Err(to_py(
        py,
        invalid(format!(
            "a name is str or bytes, not {}",
            value.get_type().name()?
        )),
    ))
}

/// Seconds as a `Duration`: finite and not negative. `what` names the
/// argument in the message.
pub(crate) fn seconds(py: Python<'_>, what: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        to_py(
            py,
            invalid(format!("{what} {value}: seconds, finite and not negative")),
        )
    })
}

/// A TTL in seconds: what is not a number of seconds at all (negative,
/// NaN, infinite) is an `InvalidTtl`, as a TTL too short or too long is
/// (the library checks those bounds where the primitive is made).
pub(crate) fn ttl(py: Python<'_>, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        crate::errors::raise(
            py,
            "InvalidTtl",
            format!(
                "invalid ttl {value}: a TTL is a finite number of seconds, at least {}",
                latchkey::limits::MIN_TTL.as_secs_f64()
            ),
        )
    })
}

/// A count (permits, parties, a latch's count): a Python int of any size.
/// What no `u64` holds is refused as the library refuses a count out of
/// its bounds (`InvalidCount`, never an `OverflowError`); `what` is the
/// library's word for it ("semaphore permits").
pub(crate) fn count(py: Python<'_>, what: &str, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(n) = value.extract::<u64>() {
        return Ok(n);
    }
    if !value.is_instance_of::<pyo3::types::PyInt>()
        || value.is_instance_of::<pyo3::types::PyBool>()
    {
        return Err(to_py(
            py,
            invalid(format!("{what}: an int, not {}", value.get_type().name()?)),
        ));
    }
    let reason = if value.lt(0)? {
        "it must be at least 1".to_owned()
    } else {
        format!("it must be at most {}", latchkey::limits::MAX_COUNT)
    };
    Err(crate::errors::raise(
        py,
        "InvalidCount",
        format!("invalid {what} {value}: {reason}"),
    ))
}

/// A fencing token: a Python int from 0 to 2**64 - 1.
pub(crate) fn token(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    value.extract::<u64>().map_err(|_| {
        to_py(
            py,
            invalid(format!(
                "fencing token {}: an int from 0 to 2**64 - 1",
                value.repr().map(|r| r.to_string()).unwrap_or_default()
            )),
        )
    })
}

/// A wait without a bound, for the calls whose Rust form takes a duration.
pub(crate) const FOREVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// A bound on a wait: seconds as `seconds` takes them, and a year at most
/// (a deadline far past that would overflow the clock).
pub(crate) fn bound(py: Python<'_>, what: &str, value: f64) -> PyResult<Duration> {
    Ok(seconds(py, what, value)?.min(FOREVER))
}

/// An optional wait (`None`: as long as it takes).
pub(crate) fn wait(py: Python<'_>, value: Option<f64>) -> PyResult<Option<Duration>> {
    value.map(|v| bound(py, "timeout", v)).transpose()
}

/// A name as given: its bytes, and whether it was a `str` (then Python
/// gets a `str` back from `.name`).
#[derive(Clone, Debug)]
pub(crate) struct Name {
    pub(crate) bytes: Vec<u8>,
    pub(crate) text: bool,
}

impl Name {
    /// Bytes the library made from a name given as this one was (a multi
    /// lock's names joined by `+`).
    pub(crate) fn like(&self, bytes: &[u8]) -> Name {
        Name {
            bytes: bytes.to_vec(),
            text: self.text,
        }
    }

    /// The name as Python gave it: `str` or `bytes`.
    pub(crate) fn to_py(&self, py: Python<'_>) -> Py<PyAny> {
        match (self.text, std::str::from_utf8(&self.bytes)) {
            (true, Ok(text)) => PyString::new(py, text).into_any().unbind(),
            _ => PyBytes::new(py, &self.bytes).into_any().unbind(),
        }
    }

    /// For `repr()` and messages.
    pub(crate) fn shown(&self) -> String {
        format!("{:?}", String::from_utf8_lossy(&self.bytes))
    }
}

/// A name given as `str` or `bytes`, remembering which.
pub(crate) fn named(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Name> {
    Ok(Name {
        bytes: name(py, value)?,
        text: value.is_instance_of::<PyString>(),
    })
}

/// A deadline `wait` from now (`None`: as long as it takes, a year).
pub(crate) fn deadline(wait: Option<Duration>) -> std::time::Instant {
    std::time::Instant::now() + wait.unwrap_or(FOREVER)
}
