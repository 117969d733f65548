//! A blocking call: the Rust future polled on the calling thread without
//! the GIL, with a look at Python's signals every slice; the count of
//! calls cancelled from Python whose cleanup has not started yet; and the
//! end of the waits still in flight at interpreter exit.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use super::handle;
use crate::errors;

/// How long a blocking wait sleeps between two looks at Python's signal
/// flags: Ctrl-C interrupts a wait within this (plus the handler's time).
const SLICE: Duration = Duration::from_millis(50);

/// Calls cancelled from Python (Ctrl-C, an asyncio cancel) whose Rust
/// future is not dropped yet: dropping it starts the library's cleanup (a
/// lock it took released, a queue entry left), which `flush` then waits for.
static CANCELLED_LIVE: AtomicUsize = AtomicUsize::new(0);

/// Set at interpreter exit: a blocking call still in flight then is a
/// daemon thread's, which Python will never join. It must not poll the
/// runtime once that stops (tokio panics: "a Tokio 1.x context was found,
/// but it is being shutdown"), nor raise into its thread (Python would
/// print the traceback while it exits): its future is dropped (which gives
/// back what it took) and its thread parked for good.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Blocking calls in flight (the exit's own aside).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

const RUNNING: u8 = 0;
const CANCELLED: u8 = 1;
const DROPPED: u8 = 2;

/// Marks one call cancelled (counted until its future is dropped).
#[derive(Clone)]
pub(crate) struct Cancel(Arc<AtomicU8>);

impl Cancel {
    pub(crate) fn mark(&self) {
        let changed =
            self.0
                .compare_exchange(RUNNING, CANCELLED, Ordering::AcqRel, Ordering::Acquire);
        if changed.is_ok() {
            CANCELLED_LIVE.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Dropped with the future it is part of, after the future's own parts.
struct DropMark(Arc<AtomicU8>);

impl Drop for DropMark {
    fn drop(&mut self) {
        if self.0.swap(DROPPED, Ordering::AcqRel) == CANCELLED {
            CANCELLED_LIVE.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// `fut`, and the handle that marks it cancelled.
pub(super) fn tracked<F: Future>(fut: F) -> (impl Future<Output = F::Output>, Cancel) {
    let flag = Arc::new(AtomicU8::new(RUNNING));
    let mark = DropMark(flag.clone());
    let tracked = async move {
        // Declared first, so dropped last: after `fut`'s cleanup started.
        let _mark = mark;
        let fut = fut;
        fut.await
    };
    (tracked, Cancel(flag))
}

/// Waits, at most until `deadline`, until every cancelled call's future is
/// dropped (its cleanup spawned); whether they all were.
pub(crate) async fn cancelled_dropped(deadline: Instant) -> bool {
    while CANCELLED_LIVE.load(Ordering::Acquire) > 0 {
        if Instant::now() >= deadline {
            return false;
        }
        // The drop is a moment away (the runtime's next poll of the task).
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    true
}

/// Runs `fut` on the runtime and waits for it without the GIL, looking at
/// Python's signals every `SLICE`: a pending KeyboardInterrupt (or any
/// exception a signal handler raises) drops the future, which the Rust
/// library makes safe (a lock it may have taken is released in the
/// background), and is raised here.
pub(crate) fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    if EXITING.load(Ordering::Acquire) {
        if on_main_thread() {
            // An `atexit` handler that runs after ours: told, not parked
            // (the interpreter's exit would wait for it for ever).
            return Err(errors::closed(
                "the interpreter is exiting: latchkey's runtime is shut down",
            ));
        }
        py.detach(park_for_good);
    }
    if super::green::patched(py) {
        return super::green::block_on(py, fut);
    }
    IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
    let _counted = Counted;
    blocking(py, fut, false)
}

/// `block_on` for the exit itself, which `EXITING` does not stop.
pub(crate) fn block_on_at_exit<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    blocking(py, fut, true)
}

/// Ends the blocking calls in flight (see `EXITING`), waiting at most
/// `within` for their threads to drop their futures.
pub(crate) fn end_waits(py: Python<'_>, within: Duration) {
    EXITING.store(true, Ordering::Release);
    let deadline = Instant::now() + within;
    py.detach(|| {
        // Each notices within a slice: a poll for a state with no signal.
        while IN_FLIGHT.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Counts a blocking call out however it ends.
struct Counted;

impl Drop for Counted {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether this is the process's main thread (the one that exits).
fn on_main_thread() -> bool {
    // SAFETY: gettid and getpid take no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) == libc::getpid() as libc::c_long }
}

/// A daemon thread's end at interpreter exit: never resumes (the process
/// exits around it).
fn park_for_good() -> ! {
    loop {
        std::thread::park();
    }
}

fn blocking<F, T>(py: Python<'_>, fut: F, at_exit: bool) -> PyResult<T>
where
    F: Future<Output = latchkey::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let handle = handle()?;
    let (fut, cancel) = tracked(fut);
    // Polled on this thread (the runtime's worker drives the sockets and
    // timers): the answer wakes this thread itself, with no task to spawn
    // and no channel to hand the result over, which was a third of an
    // uncontended acquire + release from Python.
    let mut fut = Box::pin(fut);
    loop {
        let on = handle.clone();
        let cancelled = cancel.clone();
        let (back, got) = py.detach(move || {
            let _entered = on.enter();
            let got = poll_for(fut.as_mut(), SLICE, at_exit);
            if got.is_none() && !at_exit && EXITING.load(Ordering::Acquire) {
                // Dropped here, in the runtime's context, before it stops.
                cancelled.mark();
                drop(fut);
                IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
                park_for_good();
            }
            (fut, got)
        });
        fut = back;
        match got {
            Some(result) => return result.map_err(|e| errors::to_py(py, e)),
            None => {
                if let Err(interrupted) = py.check_signals() {
                    // Dropped in the runtime's context, so that its cleanup
                    // (a lock it may have taken, released in the background)
                    // can start.
                    let _entered = handle.enter();
                    cancel.mark();
                    drop(fut);
                    return Err(interrupted);
                }
            }
        }
    }
}

/// Wakes the thread that polls a blocking call's future.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// `fut`'s output, polled on this thread, parked between polls; None when
/// it is not done within `slice` of parking (the first poll is free).
///
/// Not `Handle::block_on` under a `tokio::time::timeout`: that registered
/// a timer with the runtime's wheel on every call, from outside the
/// runtime, which locks the wheel and at times wakes a worker to re-arm
/// its sleep; a thread park bounded by `slice` needs neither. A spurious
/// wake-up (an unpark left over from an earlier call) costs one poll.
///
/// Unless `at_exit`, it stops (None) without polling once the interpreter
/// exits (`EXITING`).
fn poll_for<F: Future>(mut fut: Pin<&mut F>, slice: Duration, at_exit: bool) -> Option<F::Output> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut ends = None;
    loop {
        if !at_exit && EXITING.load(Ordering::Acquire) {
            return None;
        }
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Some(out);
        }
        let now = Instant::now();
        let end = *ends.get_or_insert(now + slice);
        if now >= end {
            return None;
        }
        std::thread::park_timeout(end - now);
    }
}
