//! What a lease, its watchdog and its lost-timer share: the validity
//! deadline and the lost signal ([`LostSignal`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::vocab::metrics::LockLabel;

/// What the guard, its watchdog and its lost-timer share.
pub(crate) struct State {
    pub(crate) valid_until: Mutex<Instant>,
    /// Set when ownership can no longer be proven (several paths may notice;
    /// the first counts it).
    pub(crate) lost: AtomicBool,
    /// What waiting tasks are woken by, made on first need: most guards never
    /// need them (two tokens made and dropped per guard were a measurable
    /// share of an uncontended acquire + release).
    pub(crate) signals: Mutex<Signals>,
    /// Whether a background task already cancels `lost` at the deadline.
    pub(crate) timer_running: AtomicBool,
    pub(crate) metrics_label: LockLabel,
}

#[derive(Default)]
pub(crate) struct Signals {
    /// Cancelled when `State::lost` is set.
    lost: Option<CancellationToken>,
    /// Cancelled when the guard is released or dropped: stops background tasks.
    done: Option<CancellationToken>,
    /// The guard was released or dropped.
    finished: bool,
}

impl State {
    /// A lease valid until `valid_until`, not lost.
    pub(crate) fn new(valid_until: Instant, metrics_label: LockLabel) -> State {
        State {
            valid_until: Mutex::new(valid_until),
            lost: AtomicBool::new(false),
            signals: Mutex::new(Signals::default()),
            timer_running: AtomicBool::new(false),
            metrics_label,
        }
    }

    /// See [`LockGuard::lost_signal`](crate::LockGuard::lost_signal): a
    /// handle on the lost signal; without a watchdog, a small task is
    /// started to fire it at the deadline.
    pub(crate) fn lost_signal(self: &Arc<Self>) -> LostSignal {
        if !self.timer_running.swap(true, Ordering::Relaxed) {
            let state = self.clone();
            let done = state.done_token();
            tokio::spawn(async move {
                tokio::select! {
                    _ = state.until_lost() => {}
                    _ = done.cancelled() => {}
                }
            });
        }
        LostSignal {
            token: self.lost_token(),
        }
    }

    pub(crate) fn signals(&self) -> std::sync::MutexGuard<'_, Signals> {
        // Nothing in `Signals` can be left half-updated by a panic.
        self.signals.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cancelled once ownership is lost (at once if it already is).
    pub(crate) fn lost_token(&self) -> CancellationToken {
        let mut signals = self.signals();
        let token = signals.lost.get_or_insert_with(CancellationToken::new);
        // Under the mutex: `mark_lost` sets the flag before taking it.
        if self.lost.load(Ordering::SeqCst) {
            token.cancel();
        }
        token.clone()
    }

    /// Cancelled once the guard is released or dropped.
    pub(crate) fn done_token(&self) -> CancellationToken {
        let mut signals = self.signals();
        let finished = signals.finished;
        let token = signals.done.get_or_insert_with(CancellationToken::new);
        if finished {
            token.cancel();
        }
        token.clone()
    }

    /// The guard is released or dropped: stop the background tasks.
    pub(crate) fn finish(&self) {
        let mut signals = self.signals();
        signals.finished = true;
        if let Some(done) = &signals.done {
            done.cancel();
        }
    }

    /// The guard was released or dropped.
    pub(crate) fn is_finished(&self) -> bool {
        self.signals().finished
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    pub(crate) fn deadline(&self) -> Instant {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn set_deadline(&self, at: Instant) {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner()) = at;
    }

    /// Ownership can no longer be proven: fire `lost` (and count it, once).
    pub(crate) fn mark_lost(&self) {
        if !self.lost.swap(true, Ordering::SeqCst) {
            crate::vocab::metrics::lock_lost(&self.metrics_label);
        }
        if let Some(lost) = &self.signals().lost {
            lost.cancel();
        }
    }

    /// Completes when ownership is lost: `lost` cancelled or the deadline
    /// passed (re-read after every wake-up, since extensions move it).
    pub(crate) async fn until_lost(&self) {
        let lost = self.lost_token();
        loop {
            let deadline = self.deadline();
            if Instant::now() >= deadline {
                self.mark_lost();
                return;
            }
            tokio::select! {
                _ = lost.cancelled() => return,
                _ = tokio::time::sleep_until(deadline.into()) => {}
            }
        }
    }
}

/// Fires when a guard's lock is lost (see [`LockGuard::lost`](crate::LockGuard::lost)); made by
/// [`LockGuard::lost_signal`](crate::LockGuard::lost_signal). Cheap to clone; clones fire together. It
/// keeps firing after the guard is gone, and never fires for a guard that
/// was released while it still held the lock.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let lock = client.lock("invoices", Duration::from_secs(10))?.with_watchdog();
/// let guard = lock.acquire().await?;
///
/// // Hand the signal to a task that must stop when the lock is gone.
/// let lost = guard.lost_signal();
/// let worker = tokio::spawn(async move {
///     tokio::select! {
///         _ = lost.lost() => eprintln!("lock lost: abandoning the batch"),
///         _ = async { /* the batch */ } => {}
///     }
/// });
/// let _ = worker.await;
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// `LostSignal::default()` never fires: the signal of nothing held (a
/// binding's stand-in for a guard already released).
#[derive(Clone, Debug, Default)]
pub struct LostSignal {
    pub(crate) token: CancellationToken,
}

impl LostSignal {
    /// Completes once the lock is lost (at once if it already is).
    ///
    /// # Cancel safety
    /// Cancel safe; it can be polled again, or from several places.
    pub async fn lost(&self) {
        self.token.cancelled().await
    }

    /// Whether the lock is known to be lost. Asks nobody.
    pub fn is_lost(&self) -> bool {
        self.token.is_cancelled()
    }
}
