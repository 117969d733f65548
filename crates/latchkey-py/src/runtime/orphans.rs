//! The asyncio calls in flight and the event loop each runs under: a loop
//! closed with a call pending (`run_until_complete` with a timeout, then
//! `loop.close()`) never cancels it, so a wait would go on, take what it
//! waited for and only then give it back. Once a second, while calls are
//! in flight, one look (with the GIL, off the runtime's worker) at their
//! loops stops the calls of those closed: their Rust futures are dropped,
//! which the library makes safe (a fair waiter leaves the queue).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::sync::Notify;

use crate::runtime::pid;

/// How often the loops of the calls in flight are looked at.
const EVERY: Duration = Duration::from_secs(1);

type Calls = HashMap<u64, (Py<PyAny>, Arc<Notify>)>;

static CALLS: Mutex<Option<Calls>> = Mutex::new(None);
static NEXT: AtomicU64 = AtomicU64::new(0);
/// The process whose runtime runs the watch (a forked child starts its own).
static WATCHED_BY: AtomicU32 = AtomicU32::new(0);

/// A call in flight under `event_loop`, stopped by `stop` when that loop is
/// found closed; forgotten when the returned guard is dropped.
pub(super) fn enter(
    handle: &tokio::runtime::Handle,
    event_loop: Py<PyAny>,
    stop: Arc<Notify>,
) -> Entered {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    CALLS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(id, (event_loop, stop));
    if WATCHED_BY.swap(pid(), Ordering::AcqRel) != pid() {
        handle.spawn(watch());
    }
    Entered(id)
}

pub(super) struct Entered(u64);

impl Drop for Entered {
    fn drop(&mut self) {
        let left = CALLS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
            .and_then(|calls| calls.remove(&self.0));
        // The loop's reference goes when pyo3 next holds the GIL.
        drop(left);
    }
}

async fn watch() {
    loop {
        tokio::time::sleep(EVERY).await;
        let any = CALLS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|calls| !calls.is_empty());
        if any {
            let _ = tokio::task::spawn_blocking(|| Python::attach(stop_orphans)).await;
        }
    }
}

/// Stops every call whose loop is closed.
fn stop_orphans(py: Python<'_>) {
    let calls: Vec<(Py<PyAny>, Arc<Notify>)> = CALLS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .flat_map(|calls| calls.values())
        .map(|(event_loop, stop)| (event_loop.clone_ref(py), stop.clone()))
        .collect();
    for (event_loop, stop) in calls {
        let closed = event_loop
            .call_method0(py, "is_closed")
            .and_then(|c| c.extract::<bool>(py))
            .unwrap_or(false);
        if closed {
            stop.notify_one();
        }
    }
}
