//! [`LockGuard`]: proof (while it lasts) that we hold a lock, with the
//! watchdog that keeps it alive and the signal that says when it is lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::Result;
use crate::lock::{Backend, Lock};
use crate::metrics::LockLabel;
use crate::names::LockKeys;
use crate::outcome::Ownership;
use crate::token::short;

/// A held lock.
///
/// The guard knows until when it may assume it holds the lock: its
/// [`deadline`](LockGuard::deadline), on the monotonic clock, computed from
/// when the acquiring (or last successful extending) request was *sent*,
/// minus a drift allowance (`ttl / 100 + 2 ms`). Past the deadline the lock
/// may already belong to someone else.
///
/// # Dropping
/// Release a guard with [`release`](LockGuard::release), which tells you
/// whether you still held it. A guard dropped without that stops its
/// watchdog, logs a warning, and releases the lock in the background
/// (compare-and-delete with its token, so never someone else's lock) if a
/// tokio runtime is running; if none is, or Redis cannot be reached, the
/// lock frees itself when its TTL runs out.
#[must_use = "the lock is released (in the background) when the guard is dropped"]
pub struct LockGuard {
    lock: Lock,
    token: String,
    /// Set at acquisition (a lock made `with_fencing`) or on the first
    /// [`LockGuard::fencing_token`] call.
    fencing_token: tokio::sync::OnceCell<u64>,
    state: Arc<State>,
    /// The release's reply was read (or it failed for good): nothing is left to do.
    released: bool,
    /// `release` was called: if it is dropped before `released`, `Drop`
    /// finishes it in the background.
    releasing: bool,
    /// The release's outcome was counted in the metrics already.
    outcome_counted: bool,
    /// When the guard was made, for the hold-time metric.
    acquired_at: Instant,
}

/// What the guard, its watchdog and its lost-timer share.
struct State {
    valid_until: Mutex<Instant>,
    /// Set when ownership can no longer be proven (several paths may notice;
    /// the first counts it).
    lost: AtomicBool,
    /// What waiting tasks are woken by, made on first need: most guards never
    /// need them (two tokens made and dropped per guard were a measurable
    /// share of an uncontended acquire + release).
    signals: Mutex<Signals>,
    /// Whether a background task already cancels `lost` at the deadline.
    timer_running: AtomicBool,
    metrics_label: LockLabel,
}

#[derive(Default)]
struct Signals {
    /// Cancelled when `State::lost` is set.
    lost: Option<CancellationToken>,
    /// Cancelled when the guard is released or dropped: stops background tasks.
    done: Option<CancellationToken>,
    /// The guard was released or dropped.
    finished: bool,
}

impl State {
    fn signals(&self) -> std::sync::MutexGuard<'_, Signals> {
        // Nothing in `Signals` can be left half-updated by a panic.
        self.signals.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cancelled once ownership is lost (at once if it already is).
    fn lost_token(&self) -> CancellationToken {
        let mut signals = self.signals();
        let token = signals.lost.get_or_insert_with(CancellationToken::new);
        // Under the mutex: `mark_lost` sets the flag before taking it.
        if self.lost.load(Ordering::SeqCst) {
            token.cancel();
        }
        token.clone()
    }

    /// Cancelled once the guard is released or dropped.
    fn done_token(&self) -> CancellationToken {
        let mut signals = self.signals();
        let finished = signals.finished;
        let token = signals.done.get_or_insert_with(CancellationToken::new);
        if finished {
            token.cancel();
        }
        token.clone()
    }

    /// The guard is released or dropped: stop the background tasks.
    fn finish(&self) {
        let mut signals = self.signals();
        signals.finished = true;
        if let Some(done) = &signals.done {
            done.cancel();
        }
    }

    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    fn deadline(&self) -> Instant {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_deadline(&self, at: Instant) {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner()) = at;
    }

    /// Ownership can no longer be proven: fire `lost` (and count it, once).
    fn mark_lost(&self) {
        if !self.lost.swap(true, Ordering::SeqCst) {
            crate::metrics::lock_lost(&self.metrics_label);
        }
        if let Some(lost) = &self.signals().lost {
            lost.cancel();
        }
    }

    /// Completes when ownership is lost: `lost` cancelled or the deadline
    /// passed (re-read after every wake-up, since extensions move it).
    async fn until_lost(&self) {
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

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &String::from_utf8_lossy(self.lock.name()))
            .field("token", &short(&self.token))
            .field("fencing_token", &self.fencing_token.get())
            .field("held", &self.is_held())
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn new(
        lock: Lock,
        token: String,
        fencing_token: Option<u64>,
        valid_until: Instant,
    ) -> Self {
        let state = Arc::new(State {
            valid_until: Mutex::new(valid_until),
            lost: AtomicBool::new(false),
            signals: Mutex::new(Signals::default()),
            timer_running: AtomicBool::new(false),
            metrics_label: lock.inner.metrics_label.clone(),
        });
        if let Some(every) = lock.inner.renew_every {
            state.timer_running.store(true, Ordering::Relaxed);
            tokio::spawn(watchdog(
                lock.inner.backend.clone(),
                lock.inner.keys.clone(),
                token.clone(),
                lock.inner.ttl,
                every,
                state.clone(),
            ));
        }
        lock.inner.local.hold();
        // The `wait` or `acquire` span this guard is made in.
        tracing::Span::current().record("token", short(&token));
        tracing::debug!(lock = %String::from_utf8_lossy(lock.name()), token = short(&token), ?fencing_token, "acquired");
        LockGuard {
            lock,
            token,
            fencing_token: tokio::sync::OnceCell::new_with(fencing_token),
            state,
            released: false,
            releasing: false,
            outcome_counted: false,
            acquired_at: Instant::now(),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &[u8] {
        self.lock.name()
    }

    /// Our owner token: the value the lock key holds while we own it.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The fencing token of this hold: greater than the token of every
    /// earlier hold of this lock name, smaller than that of every later one.
    /// Pass it to the resource you write to, so that it can reject the
    /// writes of a stale holder (see [`Client::fenced`](crate::Client::fenced)).
    ///
    /// Issued on the first call, by one round trip (a script that checks
    /// that we still hold the lock and bumps the lock's fencing counter; on
    /// a [`Redlock`](crate::Redlock), one round to all instances, plus the
    /// raise round under [`Fencing::Strict`](crate::Fencing::Strict)), and
    /// the same on every later call; ready at once when the lock was made
    /// [`with_fencing`](crate::Lock::with_fencing). Extensions keep it.
    ///
    /// Fails with [`Error::NotHeld`](crate::Error::NotHeld) when the lock is
    /// no longer ours (and marks the guard [lost](LockGuard::lost)): a token
    /// issued then could outrank the new holder's.
    ///
    /// # Cancel safety
    /// Cancel safe. If the future is dropped after the request was sent, the
    /// counter may have moved on without us keeping the token; the next call
    /// issues another one, which is just as good.
    pub async fn fencing_token(&self) -> Result<u64> {
        self.fencing_token
            .get_or_try_init(|| async {
                let issued = self
                    .lock
                    .inner.backend
                    .issue_fence(&self.lock.inner.keys, &self.token, self.state.deadline())
                    .await?;
                issued.map_err(|outcome| {
                    tracing::warn!(lock = %String::from_utf8_lossy(self.name()), token = short(&self.token), ?outcome, "fencing token refused: the lock is no longer ours");
                    self.state.mark_lost();
                    crate::Error::NotHeld {
                        name: String::from_utf8_lossy(self.name()).into_owned(),
                    }
                })
            })
            .await
            .copied()
    }

    /// The fencing token, if it was issued already (at acquisition, or by an
    /// earlier [`fencing_token`](LockGuard::fencing_token) call). Asks nobody.
    pub fn issued_fencing_token(&self) -> Option<u64> {
        self.fencing_token.get().copied()
    }

    /// Until when we may assume we hold the lock (monotonic clock).
    pub fn deadline(&self) -> Instant {
        self.state.deadline()
    }

    /// True while ownership is not known to be lost and the deadline has not
    /// passed. Asks nobody; a `true` is a statement about the past request,
    /// not a promise: use fencing tokens where that matters.
    pub fn is_held(&self) -> bool {
        !self.state.is_lost() && Instant::now() < self.state.deadline()
    }

    /// Completes when ownership can no longer be proven: at once when a
    /// renewal or extension finds the lock gone or taken, otherwise at the
    /// deadline (which the watchdog keeps pushing out while renewals
    /// succeed). Stop working on the protected resource when it completes.
    ///
    /// # Cancel safety
    /// Cancel safe; it can be polled again, or from several places.
    pub async fn lost(&self) {
        self.state.until_lost().await
    }

    /// A token that is cancelled when the lock is lost (see
    /// [`lost`](LockGuard::lost)): hand clones to tasks that must stop, or
    /// use `run_until_cancelled`. Needs a tokio runtime: without the
    /// watchdog, a small task is started to cancel it at the deadline.
    pub fn lost_token(&self) -> CancellationToken {
        if !self.state.timer_running.swap(true, Ordering::Relaxed) {
            let state = self.state.clone();
            let done = state.done_token();
            tokio::spawn(async move {
                tokio::select! {
                    _ = state.until_lost() => {}
                    _ = done.cancelled() => {}
                }
            });
        }
        self.state.lost_token()
    }

    /// Resets the TTL to `ttl` from now, if we still own the lock; otherwise
    /// marks the guard lost. One round trip.
    pub async fn extend(&self, ttl: Duration) -> Result<Ownership> {
        crate::names::check_ttl(ttl)?;
        let span = renew_span(self.name(), &self.token);
        let result = self
            .lock
            .inner
            .backend
            .extend(&self.lock.inner.keys, &self.token, ttl)
            .instrument(span)
            .await;
        crate::metrics::renewal(
            &self.lock.inner.metrics_label,
            matches!(result, Ok((Ownership::Owned, _))),
        );
        let (outcome, valid_until) = result?;
        match outcome {
            Ownership::Owned => self.state.set_deadline(valid_until),
            Ownership::Expired | Ownership::HeldByOther => {
                tracing::warn!(lock = %String::from_utf8_lossy(self.name()), token = short(&self.token), ?outcome, "extend found the lock no longer ours");
                self.state.mark_lost();
            }
        }
        Ok(outcome)
    }

    /// Releases the lock if we still own it (compare-and-delete), wakes the
    /// waiters, and stops the watchdog. One round trip.
    ///
    /// `Ok(Ownership::Owned)`: we held the lock and it is free now;
    /// `Expired` or `HeldByOther`: it was no longer ours (nothing was
    /// deleted). On a transient error (Redis unreachable, no answer in
    /// time) the release is retried once in the background, and the lock
    /// frees itself at its TTL if that fails too. The guard is consumed
    /// either way.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before the reply was read
    /// (a `timeout` around it, a `select!`, a reconnecting connection), the
    /// release is finished in the background, as for a guard dropped
    /// without release; [`Client::flush`](crate::Client::flush) waits for it.
    pub async fn release(mut self) -> Result<Ownership> {
        self.releasing = true;
        self.state.finish();
        crate::metrics::hold_time(&self.lock.inner.metrics_label, self.acquired_at.elapsed());
        let span = release_span(self.name(), &self.token);
        let result = self
            .lock
            .inner
            .backend
            .release(&self.lock.inner.keys, &self.token, false)
            .instrument(span)
            .await;
        crate::metrics::release_outcome(
            &self.lock.inner.metrics_label,
            result.as_ref().ok().copied(),
        );
        self.outcome_counted = true;
        match result {
            Ok(outcome) => {
                self.released = true;
                if outcome != Ownership::Owned {
                    tracing::warn!(lock = %String::from_utf8_lossy(self.name()), token = short(&self.token), ?outcome, "release found the lock no longer ours");
                }
                Ok(outcome)
            }
            // The request may never have reached Redis: `Drop` tries once more
            // in the background (compare-and-delete, so never someone else's lock).
            Err(e) if e.is_transient() => Err(e),
            Err(e) => {
                self.released = true;
                Err(e)
            }
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        self.state.finish();
        // After a release this runs once the release has finished.
        self.lock.inner.local.unhold();
        if self.released {
            return;
        }
        let why = if self.outcome_counted {
            "the release failed; trying once more"
        } else if self.releasing {
            "the release was cancelled before its reply was read; finishing it"
        } else {
            "lock guard dropped without release()"
        };
        tracing::warn!(lock = %String::from_utf8_lossy(self.name()), token = short(&self.token), why, "releasing in the background");
        if !self.releasing {
            crate::metrics::hold_time(&self.lock.inner.metrics_label, self.acquired_at.elapsed());
        }
        release_in_background(
            self.lock.inner.backend.clone(),
            self.lock.inner.keys.clone(),
            std::mem::take(&mut self.token),
            why,
            (!self.outcome_counted).then(|| self.lock.inner.metrics_label.clone()),
        );
    }
}

/// The span of a release, with the lock's name and a token prefix.
fn release_span(name: &[u8], token: &str) -> tracing::Span {
    tracing::debug_span!("release", lock = %String::from_utf8_lossy(name), token = short(token))
}

/// The span of a renewal (watchdog or extend).
fn renew_span(name: &[u8], token: &str) -> tracing::Span {
    tracing::debug_span!("renew", lock = %String::from_utf8_lossy(name), token = short(token))
}

/// Best-effort compare-and-delete on a tokio runtime, if there is one.
/// `counted`: the label under which to count the release in the metrics
/// (a held guard's), or `None` for a lock we never knew we held.
pub(crate) fn release_in_background(
    backend: Backend,
    keys: Arc<LockKeys>,
    token: String,
    why: &'static str,
    counted: Option<LockLabel>,
) {
    if tokio::runtime::Handle::try_current().is_err() {
        tracing::warn!(
            why,
            "no tokio runtime to release the lock on; it frees itself at its TTL"
        );
        return;
    }
    let span = release_span(&keys.key[backend.prefix().len()..], &token);
    let tracker = backend.background().clone();
    tracker.spawn(
        async move {
            let result = backend.release(&keys, &token, true).await;
            if let Some(label) = &counted {
                crate::metrics::release_outcome(label, result.as_ref().ok().copied());
            }
            match result {
                Ok(outcome) => tracing::debug!(why, ?outcome, token = short(&token), "background release"),
                Err(e) => tracing::warn!(why, error = %e, "background release failed; the lock frees itself at its TTL"),
            }
        }
        .instrument(span),
    );
}

/// Renews the lease every `every` until the guard is done; cancels `lost`
/// as soon as ownership cannot be proven.
async fn watchdog(
    backend: Backend,
    keys: Arc<LockKeys>,
    token: String,
    ttl: Duration,
    every: Duration,
    state: Arc<State>,
) {
    let done = state.done_token();
    let name = String::from_utf8_lossy(&keys.key).into_owned();
    let label = state.metrics_label.clone();
    let mut next = Instant::now() + every;
    loop {
        let deadline = state.deadline();
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tokio::time::sleep_until(next.min(deadline).into()) => {}
        }
        let now = Instant::now();
        if now >= state.deadline() {
            tracing::warn!(lock = %name, token = short(&token), "lease ran out before a renewal succeeded; lock lost");
            state.mark_lost();
            return;
        }
        // A renewal that answers after the deadline is worthless: bound it.
        let span = renew_span(&keys.key[backend.prefix().len()..], &token);
        let renewal = backend.extend(&keys, &token, ttl).instrument(span);
        let result = tokio::select! {
            _ = done.cancelled() => return,
            r = tokio::time::timeout_at(state.deadline().into(), renewal) => r,
        };
        crate::metrics::renewal(&label, matches!(result, Ok(Ok((Ownership::Owned, _)))));
        match result {
            Ok(Ok((Ownership::Owned, valid_until))) => {
                state.set_deadline(valid_until);
                next = Instant::now() + every;
                tracing::trace!(lock = %name, token = short(&token), "renewed");
            }
            Ok(Ok((outcome, _))) => {
                tracing::warn!(lock = %name, token = short(&token), ?outcome, "renewal found the lock no longer ours; lock lost");
                state.mark_lost();
                return;
            }
            Ok(Err(e)) => {
                // Try again soon, but not in a tight loop: a quarter of the
                // interval leaves several tries before the deadline.
                tracing::warn!(lock = %name, token = short(&token), error = %e, "renewal failed; retrying until the lease runs out");
                next = Instant::now() + every / 4;
            }
            Err(_) => {
                tracing::warn!(lock = %name, token = short(&token), "renewal did not answer before the lease ran out; lock lost");
                state.mark_lost();
                return;
            }
        }
    }
}
