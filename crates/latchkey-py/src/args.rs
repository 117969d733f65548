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
