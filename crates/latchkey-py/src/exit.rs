//! At interpreter exit every hold this process has is given back, as a
//! Rust program's guards are at the end of `main`, instead of staying
//! taken until its TTL, whatever owned it: the holds still alive (a guard
//! in a module global, a lock held across the end of a script) are
//! released; then every client is flushed, those Python still has and
//! those it dropped (a client made in `main()`), which gives back the
//! holds kept idle and waits for the background releases of guards
//! dropped unreleased and of calls cancelled; then the runtime stops.
//! python/latchkey/__init__.py registers `at_exit` with `atexit`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use pyo3::prelude::*;

use crate::runtime::{block_on, handle};

/// How long the exit waits for the releases of the holds alive.
const RELEASE_WITHIN: Duration = Duration::from_secs(1);

/// How long it then waits for the clients' background work.
const FLUSH_WITHIN: Duration = Duration::from_secs(2);

/// A hold that can be released from here.
pub(crate) trait Releasable: Send + Sync + 'static {
    fn release_at_exit(self: Arc<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

static LIVE: Mutex<Vec<Weak<dyn Releasable>>> = Mutex::new(Vec::new());

/// Remembers `hold` (weakly: a hold dropped before is released as usual).
pub(crate) fn register<R: Releasable>(hold: &Arc<R>) {
    let weak: Weak<dyn Releasable> = Arc::downgrade(hold) as Weak<dyn Releasable>;
    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    // Dead entries go now and then: amortized, the list stays as long as
    // twice the holds alive.
    if live.len() >= 64 && live.len().is_power_of_two() {
        live.retain(|w| w.strong_count() > 0);
    }
    live.push(weak);
}

/// Gives back everything (see the module docs), then stops the runtime.
pub(crate) fn at_exit(py: Python<'_>) {
    let _ = release_all(py);
    let _ = block_on(py, async {
        let deadline = std::time::Instant::now() + FLUSH_WITHIN;
        crate::clients::core::flush_all(FLUSH_WITHIN).await;
        crate::runtime::cancelled_dropped(deadline).await;
        Ok(())
    });
    crate::runtime::shutdown(py);
    // What the releases above logged, before `logging` shuts down.
    crate::observe::log::finish(py);
}

/// Releases every hold still alive, waiting at most `RELEASE_WITHIN`.
fn release_all(py: Python<'_>) -> PyResult<()> {
    let holds: Vec<Arc<dyn Releasable>> =
        std::mem::take(&mut *LIVE.lock().unwrap_or_else(|p| p.into_inner()))
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
    if holds.is_empty() {
        return Ok(());
    }
    let handle = handle()?;
    let releases: Vec<_> = holds
        .into_iter()
        .map(|hold| handle.spawn(hold.release_at_exit()))
        .collect();
    block_on(py, async move {
        let all = async {
            for release in releases {
                let _ = release.await;
            }
        };
        let _ = tokio::time::timeout(RELEASE_WITHIN, all).await;
        Ok(())
    })
}
