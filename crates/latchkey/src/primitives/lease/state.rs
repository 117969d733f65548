//! What a lease, its watchdog and its watch share: the validity deadline,
//! the stop margin, the lost signal ([`LostSignal`]) and why it fired.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::vocab::metrics::LockLabel;
use crate::vocab::outcome::LostReason;

/// What the guard, its watchdog and its watch share.
pub(crate) struct State {
    /// The deadline, and the stop margin before it now: the hold's margin,
    /// or, for a deadline that came with less time left than twice that (a
    /// fair hand-off's short TTL), half the time it left, until a renewal
    /// sets the next deadline.
    valid_until: Mutex<(Instant, Duration)>,
    /// How long before the deadline the hold counts as lost: a holder that
    /// stops within it is gone before anyone else can take the hold.
    pub(crate) margin: Duration,
    /// The hold's cap (`with_max_hold`): it counts as lost the margin
    /// before the cap too, whatever its deadline.
    pub(crate) cap: Option<Instant>,
    /// Set when ownership can no longer be proven (several paths may notice;
    /// the first counts it, and gives the reason).
    pub(crate) lost: AtomicBool,
    reason: Mutex<Option<LostReason>>,
    /// A watchdog renews the hold: a deadline reached while its renewals go
    /// unanswered is then [`LostReason::Unreachable`].
    pub(crate) watchdog: AtomicBool,
    /// A renewal was sent and has not been answered yet, or failed: a
    /// deadline reached now is Redis's silence. Otherwise (the last one was
    /// answered) it is the holder's: a process paused or starved past the
    /// time to renew, [`LostReason::Expired`].
    pub(crate) renewal_unanswered: AtomicBool,
    /// The deadline is the cap's (a renewal was shortened to end at it, or
    /// none can be made): a deadline reached is [`LostReason::MaxHold`].
    pub(crate) capped: AtomicBool,
    /// Ended by its client's close, which released it: the guard's own
    /// release and drop have nothing left to do.
    pub(crate) closed: AtomicBool,
    /// What waiting tasks are woken by, made on first need: most guards never
    /// need them (two tokens made and dropped per guard were a measurable
    /// share of an uncontended acquire + release).
    pub(crate) signals: Mutex<Signals>,
    /// Whether a background task (the watchdog, or the watch a lost signal
    /// starts) already fires `lost`.
    pub(crate) timer_running: AtomicBool,
    /// Another listener of the hold's channel (`release_requested`) heard
    /// a revocation: the watch checks the hold now, and a loss it finds is
    /// [`LostReason::Revoked`].
    pub(crate) revoked_heard: AtomicBool,
    /// Wakes the watch to check the hold now.
    pub(crate) check_now: tokio::sync::Notify,
    pub(crate) metrics_label: LockLabel,
    /// Until when the program asked the hold to last (`extend`): the
    /// watchdog's renewals never shorten the key's life below it, so an
    /// `extend` longer than the TTL is not undone by the next renewal.
    extended_to: Mutex<Option<Instant>>,
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
    /// A lease valid until `valid_until`, lost `margin` before it.
    pub(crate) fn new(
        valid_until: Instant,
        margin: Duration,
        cap: Option<Instant>,
        metrics_label: LockLabel,
    ) -> State {
        State {
            valid_until: Mutex::new((
                valid_until,
                margin.min(valid_until.saturating_duration_since(Instant::now()) / 2),
            )),
            margin,
            cap,
            lost: AtomicBool::new(false),
            reason: Mutex::new(None),
            watchdog: AtomicBool::new(false),
            renewal_unanswered: AtomicBool::new(false),
            capped: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            signals: Mutex::new(Signals::default()),
            timer_running: AtomicBool::new(false),
            revoked_heard: AtomicBool::new(false),
            check_now: tokio::sync::Notify::new(),
            metrics_label,
            extended_to: Mutex::new(None),
        }
    }

    /// The TTL a renewal sent now asks for to keep the hold's expiry where
    /// it is (its deadline plus the drift allowance); `None` when less than
    /// `MIN_TTL` is left: nothing can be renewed.
    pub(crate) fn ttl_to_expiry(&self, ttl: Duration) -> Option<Duration> {
        let left = (self.deadline() + crate::vocab::protocol::drift(ttl))
            .saturating_duration_since(Instant::now());
        (left >= crate::vocab::names::MIN_TTL).then_some(left)
    }

    /// Remembers that the program asked the hold to last until `at`.
    pub(crate) fn extend_to(&self, at: Instant) {
        let mut to = self.extended_to.lock().unwrap_or_else(|p| p.into_inner());
        *to = Some(to.map_or(at, |was| was.max(at)));
    }

    /// The TTL a renewal sent now asks for: `ttl`, or longer while an
    /// `extend` asked the hold to last past `now + ttl`.
    pub(crate) fn renewal_ttl(&self, ttl: Duration) -> Duration {
        let to = *self.extended_to.lock().unwrap_or_else(|p| p.into_inner());
        to.map_or(ttl, |to| {
            ttl.max(to.saturating_duration_since(Instant::now()))
        })
    }

    /// A handle on the lost signal.
    pub(crate) fn lost_signal(&self) -> LostSignal {
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

    /// Ended by its client's close: lost (`Closed`) and finished. False
    /// when it had ended already.
    pub(crate) fn close(&self) -> bool {
        if self.is_finished() || self.closed.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.mark_lost(LostReason::Closed);
        self.finish();
        true
    }

    /// The guard was released or dropped.
    pub(crate) fn is_finished(&self) -> bool {
        self.signals().finished
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Held: not known lost, and the stop margin not reached.
    pub(crate) fn is_held(&self) -> bool {
        !self.is_lost() && Instant::now() < self.stop_at()
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.valid_until.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    /// When the hold counts as lost unless a renewal moves the deadline:
    /// the stop margin before the deadline, or before the cap.
    pub(crate) fn stop_at(&self) -> Instant {
        let (deadline, margin) = *self.valid_until.lock().unwrap_or_else(|p| p.into_inner());
        // Where the hold ends: its deadline, or its cap if that comes first.
        let end = self.cap.map_or(deadline, |cap| cap.min(deadline));
        end.checked_sub(margin).unwrap_or(end)
    }

    pub(crate) fn set_deadline(&self, at: Instant) {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner()) = (at, self.margin);
    }

    /// Why the hold was lost: the reason given when it was marked, or, for
    /// a hold whose stop margin passed with nobody watching, the deadline's.
    pub(crate) fn reason(&self) -> Option<LostReason> {
        if let Some(reason) = *self.reason.lock().unwrap_or_else(|p| p.into_inner()) {
            return Some(reason);
        }
        (Instant::now() >= self.stop_at()).then(|| self.deadline_reason())
    }

    /// Why a hold whose stop margin came is lost.
    pub(crate) fn deadline_reason(&self) -> LostReason {
        let by_cap = self.cap.is_some_and(|cap| cap <= self.deadline());
        if by_cap || self.capped.load(Ordering::Relaxed) {
            LostReason::MaxHold
        } else if self.watchdog.load(Ordering::Relaxed)
            && self.renewal_unanswered.load(Ordering::Relaxed)
        {
            LostReason::Unreachable
        } else {
            LostReason::Expired
        }
    }

    /// Ownership can no longer be proven: fire `lost` (and count it, once,
    /// with the first reason given).
    pub(crate) fn mark_lost(&self, reason: LostReason) {
        {
            let mut kept = self.reason.lock().unwrap_or_else(|p| p.into_inner());
            kept.get_or_insert(reason);
        }
        if !self.lost.swap(true, Ordering::SeqCst) {
            crate::vocab::metrics::lock_lost(&self.metrics_label, reason);
        }
        if let Some(lost) = &self.signals().lost {
            lost.cancel();
        }
    }

    /// Completes when ownership is lost: `lost` cancelled, or the stop
    /// margin reached (re-read after every wake-up, since renewals move the
    /// deadline).
    pub(crate) async fn until_lost(&self) {
        let lost = self.lost_token();
        loop {
            let stop_at = self.stop_at();
            if Instant::now() >= stop_at {
                self.mark_lost(self.deadline_reason());
                return;
            }
            tokio::select! {
                _ = lost.cancelled() => return,
                _ = tokio::time::sleep_until(stop_at.into()) => {}
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
