//! The lease options every lease recipe (a lock, several locks, a
//! semaphore, a read-write lock) takes as keywords, applied through the
//! library's `HoldOptions`.

use std::time::Duration;

use latchkey::HoldOptions;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::args;

/// `watchdog=`, `fencing=`, `max_hold=`, `ask=`, `stop_margin=`,
/// `hold_at_least=`.
#[derive(Clone)]
pub(crate) struct LeaseOptions {
    watchdog: bool,
    fencing: bool,
    max_hold: Option<Duration>,
    ask: bool,
    stop_margin: Option<Duration>,
    hold_at_least: Option<Duration>,
}

impl LeaseOptions {
    /// Takes the lease keywords out of `options` (a call's `**options`,
    /// a dict of its own): what is left is the caller's own keywords, and
    /// [`no_more`] refuses the rest. Each keyword is named here only.
    pub(crate) fn take(
        py: Python<'_>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<LeaseOptions> {
        let Some(options) = options else {
            return Ok(LeaseOptions {
                watchdog: true,
                fencing: false,
                max_hold: None,
                ask: false,
                stop_margin: None,
                hold_at_least: None,
            });
        };
        Ok(LeaseOptions {
            watchdog: take_bool(options, "watchdog", true)?,
            fencing: take_bool(options, "fencing", false)?,
            max_hold: take_seconds(py, options, "max_hold")?,
            ask: take_bool(options, "ask", false)?,
            stop_margin: take_seconds(py, options, "stop_margin")?,
            hold_at_least: take_seconds(py, options, "hold_at_least")?,
        })
    }

    /// `recipe` as these options make it.
    pub(crate) fn apply<P: HoldOptions>(&self, mut recipe: P) -> latchkey::Result<P> {
        if self.watchdog {
            recipe = recipe.with_watchdog();
        }
        if self.fencing {
            recipe = recipe.with_fencing();
        }
        if self.ask {
            recipe = recipe.with_asking();
        }
        if let Some(max_hold) = self.max_hold {
            recipe = recipe.with_max_hold(max_hold)?;
        }
        if let Some(margin) = self.stop_margin {
            recipe = recipe.with_stop_margin(margin)?;
        }
        if let Some(least) = self.hold_at_least {
            recipe = recipe.with_hold_at_least(least)?;
        }
        Ok(recipe)
    }
}

/// The keyword `key` taken out of `options`; `None` when absent.
fn take_any<'py>(options: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    let value = options.get_item(key)?;
    if value.is_some() {
        options.del_item(key)?;
    }
    Ok(value)
}

fn wrong(key: &str, e: PyErr) -> PyErr {
    PyTypeError::new_err(format!("argument '{key}': {e}"))
}

/// The boolean keyword `key` taken out of `options`, else `default`.
pub(crate) fn take_bool(options: &Bound<'_, PyDict>, key: &str, default: bool) -> PyResult<bool> {
    match take_any(options, key)? {
        Some(value) => value.extract().map_err(|e| wrong(key, e)),
        None => Ok(default),
    }
}

/// The keyword `key` (seconds, or None) taken out of `options`.
pub(crate) fn take_seconds(
    py: Python<'_>,
    options: &Bound<'_, PyDict>,
    key: &str,
) -> PyResult<Option<Duration>> {
    let Some(value) = take_any(options, key)? else {
        return Ok(None);
    };
    let seconds: Option<f64> = value.extract().map_err(|e| wrong(key, e))?;
    seconds.map(|v| args::seconds(py, key, v)).transpose()
}

/// Refuses the keywords left in `options`, as Python refuses a keyword a
/// function does not take.
pub(crate) fn no_more(what: &str, options: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    match options.and_then(|o| o.keys().iter().next()) {
        Some(key) => Err(PyTypeError::new_err(format!(
            "{what}() got an unexpected keyword argument {}",
            key.repr()?
        ))),
        None => Ok(()),
    }
}
