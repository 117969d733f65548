//! The lease options every lease recipe (a lock, several locks, a
//! semaphore, a read-write lock) takes as keywords, applied through the
//! library's `HoldOptions`.

use std::time::Duration;

use latchkey::HoldOptions;
use pyo3::prelude::*;

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
    pub(crate) fn new(
        py: Python<'_>,
        watchdog: bool,
        fencing: bool,
        max_hold: Option<f64>,
        ask: bool,
        stop_margin: Option<f64>,
        hold_at_least: Option<f64>,
    ) -> PyResult<LeaseOptions> {
        let seconds = |what, v: Option<f64>| v.map(|v| args::seconds(py, what, v)).transpose();
        Ok(LeaseOptions {
            watchdog,
            fencing,
            max_hold: seconds("max_hold", max_hold)?,
            ask,
            stop_margin: seconds("stop_margin", stop_margin)?,
            hold_at_least: seconds("hold_at_least", hold_at_least)?,
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
