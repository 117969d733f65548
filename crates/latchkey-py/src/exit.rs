//! At interpreter exit every hold this process has is given back, as a
//! Rust program's guards are at the end of `main`, instead of staying
//! taken until its TTL, whatever owned it: first the blocking waits still
//! in flight (daemon threads': the others were joined) are ended, their
//! threads parked for good, so that nothing polls the runtime while it
//! stops; then every client is closed, those Python still has and those
//! it dropped with holds still kept (a client made in `main()`): each
//! gives back every hold it keeps (a guard in a module global, a lock held
//! across the end of a script, a guard nothing references) and the holds
//! kept idle, and waits for its background releases; the last flushes of
//! the clients dropped, and the releases of calls cancelled, are waited
//! for too; then the runtime stops.
//! python/latchkey/__init__.py registers `at_exit` with `atexit`.

use std::time::Duration;

use pyo3::prelude::*;

use crate::runtime::{block_on_at_exit, end_waits};

/// How long the exit waits for the daemon threads' waits to end.
const WAITS_END_WITHIN: Duration = Duration::from_millis(500);

/// How long the exit waits for the clients' closes: the releases of the
/// holds alive and the background work.
const CLOSE_WITHIN: Duration = Duration::from_secs(3);

/// Gives back everything (see the module docs), then stops the runtime.
pub(crate) fn at_exit(py: Python<'_>) {
    end_waits(py, WAITS_END_WITHIN);
    let _ = block_on_at_exit(py, async {
        let deadline = std::time::Instant::now() + CLOSE_WITHIN;
        crate::clients::core::close_all(CLOSE_WITHIN).await;
        crate::runtime::cancelled_dropped(deadline).await;
        Ok(())
    });
    crate::runtime::shutdown(py);
    // What the releases above logged, before `logging` shuts down.
    crate::observe::log::finish(py);
}
