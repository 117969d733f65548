//! The library's tracing events, as records of Python's `logging` module:
//! logger `latchkey` and its children by target (`latchkey::primitives::
//! lease::renew` logs to `latchkey.primitives.lease.renew`).
//!
//! An event never takes the GIL where it happens: a runtime thread (or a
//! Python thread inside a call) that waited for the GIL while holding one
//! of the library's locks could deadlock with a Python thread that holds
//! the GIL and wants that lock. Events go into a bounded channel instead,
//! and one thread of this process (started with the runtime, started again
//! in a forked child) takes the GIL, holding nothing else, to log them.
//!
//! Which events are wanted is Python's to say (`Logger.isEnabledFor`), and
//! asking it needs the GIL: the most verbose level any `latchkey` logger
//! wants is kept in an atomic, read by every event (an atomic load) and
//! refreshed from Python when a client is made and once a second by that
//! thread. Spans are not forwarded (their names and fields would cost a
//! formatting per span): the events carry the lock's name and token.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// This process's id (a forked child's is its own; the runtime's module
/// keeps the same rule, and starts this one's thread: this looks no higher).
fn pid() -> u32 {
    std::process::id()
}

/// The levels, most severe first; `OFF` wants nothing.
const OFF: u8 = 0;
const fn rank(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

/// `logging`'s number for a rank (TRACE: 5, below DEBUG, as is usual).
const fn python_level(rank: u8) -> u8 {
    match rank {
        1 => 40,
        2 => 30,
        3 => 20,
        4 => 10,
        _ => 5,
    }
}

/// The most verbose rank any `latchkey` logger wants. Until Python says
/// (the package's import does, before any event), `logging`'s default:
/// warnings and errors.
static WANTED: AtomicU8 = AtomicU8::new(2);

/// How many records may wait for the logging thread; past it, events are
/// dropped (and counted) rather than held in memory or waited for.
const QUEUE: usize = 1024;

/// Records dropped because the queue was full.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Set at the interpreter's exit: the logging thread stops taking the GIL.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// How often the logging thread asks Python which levels are wanted.
const REFRESH_EVERY: Duration = Duration::from_secs(1);

struct Record {
    rank: u8,
    target: &'static str,
    message: String,
}

/// What the logging thread is sent: a record, or a request to log what is
/// queued and say when done (the interpreter's exit).
enum Message {
    Record(Record),
    Drain(SyncSender<()>),
}

/// How long the interpreter's exit waits for the last records to be logged.
const DRAIN_WITHIN: Duration = Duration::from_millis(200);

/// The channel's sending end, and the process whose logging thread reads it.
static QUEUED: Mutex<Queued> = Mutex::new(None);

/// The layer over tracing's registry: what passes `WANTED` is queued.
struct ToLogging;

impl<S: Subscriber> Layer<S> for ToLogging {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        match metadata.is_span() {
            true => Interest::never(),
            // Asked each time (`enabled`): Python's levels change.
            false => Interest::sometimes(),
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        metadata.is_event() && rank(metadata.level()) <= WANTED.load(Ordering::Relaxed)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        // Any: WANTED changes without the callsites knowing.
        Some(LevelFilter::TRACE)
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut text = Text::default();
        event.record(&mut text);
        let metadata = event.metadata();
        queue(Record {
            rank: rank(metadata.level()),
            target: metadata.target(),
            message: text.done(),
        });
    }
}

/// An event's message, then its fields as `key=value`.
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Text {
    fn done(mut self) -> String {
        self.message.push_str(&self.fields);
        self.message
    }
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message.push_str(value),
            name => {
                let _ = write!(self.fields, " {name}={value}");
            }
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => {
                let _ = write!(self.message, "{value:?}");
            }
            name => {
                let _ = write!(self.fields, " {name}={value:?}");
            }
        }
    }
}

fn queue(record: Record) {
    let queued = QUEUED.lock().unwrap_or_else(|p| p.into_inner());
    match &*queued {
        Some((owner, to)) if *owner == pid() => {
            if to.try_send(Message::Record(record)).is_err() {
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
        }
        // No logging thread in this process yet (no runtime): the event
        // happened on the calling thread, before any client was used.
        _ => {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

type Queued = Option<(u32, SyncSender<Message>)>;

thread_local! {
    /// The queue's lock, held by the forking thread across a fork.
    static FORKING: std::cell::RefCell<Option<std::sync::MutexGuard<'static, Queued>>> =
        const { std::cell::RefCell::new(None) };
}

/// Takes the queue's lock just before a fork (see mod.rs).
pub(super) fn hold_for_fork() {
    let queued = QUEUED.lock().unwrap_or_else(|p| p.into_inner());
    FORKING.with(|held| *held.borrow_mut() = Some(queued));
}

/// Gives it back just after, in the parent and in the child.
pub(super) fn release_after_fork() {
    FORKING.with(|held| drop(held.borrow_mut().take()));
}

/// Makes the forwarding layer tracing's global subscriber (once; one
/// installed first by someone else is left in place).
pub(super) fn install() {
    let subscriber = tracing_subscriber::registry().with(ToLogging);
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// Starts this process's logging thread unless it runs (the runtime's
/// start calls this: the first use of a client, and again in a forked
/// child, where the parent's thread does not exist).
pub(crate) fn start() {
    let mut queued = QUEUED.lock().unwrap_or_else(|p| p.into_inner());
    if matches!(&*queued, Some((owner, _)) if *owner == pid()) {
        return;
    }
    let (to, from) = sync_channel(QUEUE);
    let spawned = std::thread::Builder::new()
        .name("latchkey-log".into())
        .spawn(move || forward(from));
    if spawned.is_ok() {
        *queued = Some((pid(), to));
    }
}

/// The logging thread: logs what arrives, and asks Python which levels are
/// wanted, until the interpreter's exit (or the channel's end).
fn forward(from: Receiver<Message>) {
    // Python calls a thread it did not start "Dummy-N": records say whose.
    let mut named = false;
    loop {
        let first = match from.recv_timeout(REFRESH_EVERY) {
            Ok(message) => Some(message),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if STOPPED.load(Ordering::Acquire) {
            return;
        }
        let attached = Python::try_attach(|py| {
            if !named {
                named = name_thread(py).is_ok();
            }
            for message in first.into_iter().chain(from.try_iter()) {
                match message {
                    Message::Record(record) => emit(py, &record),
                    Message::Drain(done) => {
                        let _ = done.try_send(());
                    }
                }
            }
            refresh(py);
        });
        if attached.is_none() {
            return; // the interpreter is gone
        }
    }
}

fn name_thread(py: Python<'_>) -> PyResult<()> {
    let thread = py.import("threading")?.getattr("current_thread")?.call0()?;
    thread.setattr("name", "latchkey-log")
}

fn emit(py: Python<'_>, record: &Record) {
    if let Err(e) = log(py, record) {
        // Python's logging reports its handlers' own errors; this is the
        // logger's lookup failing.
        e.write_unraisable(py, None);
    }
}

fn log(py: Python<'_>, record: &Record) -> PyResult<()> {
    let name = record.target.replace("::", ".");
    let logger = py.import("logging")?.getattr("getLogger")?.call1((name,))?;
    logger.call_method1("log", (python_level(record.rank), record.message.as_str()))?;
    Ok(())
}

/// Asks Python (python/latchkey/_logging.py) which rank the `latchkey`
/// loggers want now.
pub(crate) fn refresh(py: Python<'_>) {
    let wanted = py
        .import("latchkey._logging")
        .and_then(|m| m.getattr("_wanted")?.call0()?.extract::<u8>());
    if let Ok(wanted) = wanted {
        WANTED.store(wanted.min(5), Ordering::Relaxed);
    }
}

/// At the interpreter's exit (with the GIL, after the runtime stopped):
/// logs what is still queued and stops the logging thread.
pub(crate) fn finish(py: Python<'_>) {
    WANTED.store(OFF, Ordering::Relaxed);
    let queued = QUEUED.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some((owner, to)) = queued {
        let (done, drained) = sync_channel(1);
        if owner == pid() && to.try_send(Message::Drain(done)).is_ok() {
            // Without the GIL, which the logging thread takes to log.
            py.detach(move || drained.recv_timeout(DRAIN_WITHIN).ok());
        }
    }
    // The sender dropped, the thread's wait ends; it takes the GIL no more.
    STOPPED.store(true, Ordering::Release);
}

/// Records dropped (a full queue, or an event before any client was used).
#[pyfunction]
pub(crate) fn _log_records_dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Asks Python again which levels the `latchkey` loggers want (a client's
/// construction does this; the logging thread once a second).
#[pyfunction]
pub(crate) fn _refresh_logging(py: Python<'_>) {
    refresh(py);
}
