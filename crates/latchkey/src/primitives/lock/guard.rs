//! [`LockGuard`]: proof (while it lasts) that we hold a lock, with the
//! watchdog that keeps it alive and the signal that says when it is lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::backend::{release_span, Backend};
use crate::primitives::lock::release::release_in_background;
use crate::primitives::lock::spec::{LockSpec, Replicated};
use crate::primitives::watchdog::{renew_span, watchdog, LostSignal, Signals, State};
use crate::vocab::error::Result;
use crate::vocab::names::LockKeys;
use crate::vocab::outcome::Ownership;
use crate::vocab::token::short;

/// A held lock.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// use latchkey::Ownership;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let lock = client.lock("invoices", Duration::from_secs(10))?;
/// let guard = lock.acquire().await?;
///
/// let token = guard.fencing_token().await?; // pass it with every write
/// println!("held until {:?}, fencing token {token}", guard.deadline());
/// if guard.extend(Duration::from_secs(30)).await? != Ownership::Owned {
///     eprintln!("lost the lock before extending it");
/// }
/// match guard.release().await? {
///     Ownership::Owned => {}                   // held to the end
///     other => eprintln!("was not ours any more: {other:?}"),
/// }
/// # Ok(()) }
/// ```
///
/// # What it promises
/// While [`is_held`](LockGuard::is_held) is true (before the deadline, not
/// [lost](LockGuard::lost)), nobody else holds the lock, unless Redis lost
/// the key (see [`Lock`](crate::Lock), "Limits"). `release` and `extend` act
/// only on our own hold and say what they found ([`Ownership`](crate::Ownership)).
/// Its fencing tokens are greater than those of all earlier holds.
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
    lock: Arc<LockSpec>,
    token: String,
    /// Set at acquisition (a lock made `with_fencing`) or on the first
    /// [`LockGuard::fencing_token`] call.
    fencing_token: tokio::sync::OnceCell<u64>,
    state: Arc<State>,
    /// How far [`release`](LockGuard::release) got: `Drop` finishes what it left.
    release: ReleaseState,
    /// When the guard was made, for the hold-time metric.
    acquired_at: Instant,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.lock.display_name())
            .field("token", &short(&self.token))
            .field("fencing_token", &self.fencing_token.get())
            .field("held", &self.is_held())
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn new(
        lock: Arc<LockSpec>,
        token: String,
        fencing_token: Option<u64>,
        valid_until: Instant,
    ) -> Self {
        let state = Arc::new(State {
            valid_until: Mutex::new(valid_until),
            lost: AtomicBool::new(false),
            signals: Mutex::new(Signals::default()),
            timer_running: AtomicBool::new(false),
            metrics_label: lock.metrics_label.clone(),
        });
        if let Some(every) = lock.renew_every {
            state.timer_running.store(true, Ordering::Relaxed);
            tokio::spawn(watchdog(
                lock.backend.clone(),
                lock.keys.clone(),
                token.clone(),
                lock.ttl,
                every,
                state.clone(),
            ));
        }
        lock.local.hold();
        tracing::debug!(lock = %lock.display_name(), token = short(&token), ?fencing_token, "acquired");
        LockGuard {
            lock,
            token,
            fencing_token: tokio::sync::OnceCell::new_with(fencing_token),
            state,
            release: ReleaseState::NotAsked,
            acquired_at: Instant::now(),
        }
    }

    /// A fair lock's hand-off sets a short TTL (the waiter lease, so that a
    /// waiter that died in between frees the lock soon): bring it to the
    /// lock's TTL at `at` (a hold released before costs no extension), in
    /// the background, as the watchdog would; retried until the guard's
    /// deadline while Redis does not answer.
    pub(crate) fn extend_after_handoff(&self, at: Instant) {
        let (backend, keys, token) = (
            self.lock.backend.clone(),
            self.lock.keys.clone(),
            self.token.clone(),
        );
        let (ttl, state) = (self.lock.ttl, Arc::downgrade(&self.state));
        // No task until it is due: most holds are released before (see
        // `transport/deferred.rs`), and then this finds the guard finished.
        let job: crate::transport::deferred::Job = Box::new(move || {
            let Some(state) = state.upgrade().filter(|s| !s.is_finished()) else {
                return;
            };
            tokio::spawn(extend_handed(backend, keys, token, ttl, state));
        });
        match &self.lock.backend {
            Backend::Single(session) => session.inner.deferred.run_at(at, job),
            // Fair locks are single-server; anything else gets a task.
            Backend::Redlock(_) => {
                tokio::spawn(async move {
                    tokio::time::sleep_until(at.into()).await;
                    job();
                });
            }
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &[u8] {
        &self.lock.name
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
    /// For a lock made [`with_replicas`](crate::Lock::with_replicas), a
    /// token issued here counts only once the replicas acknowledged it (a
    /// second request, as at acquisition).
    ///
    /// Fails with [`Error::NotHeld`](crate::Error::NotHeld) when the lock is
    /// no longer ours (and marks the guard [lost](LockGuard::lost)): a token
    /// issued then could outrank the new holder's. Fails with
    /// [`Error::TooFewReplicas`](crate::Error::TooFewReplicas) when too few
    /// replicas acknowledged the token: the lock stays held, and the next
    /// call issues another token.
    ///
    /// # Cancel safety
    /// Cancel safe. If the future is dropped after the request was sent (or
    /// while the replicas are asked), the counter may have moved on without
    /// us keeping the token; the next call issues another one, which is just
    /// as good. The lock stays held either way.
    pub async fn fencing_token(&self) -> Result<u64> {
        self.fencing_token
            .get_or_try_init(|| async {
                let issued = self
                    .lock
                    .backend
                    .issue_fence(&self.lock.keys, &self.token, self.state.deadline())
                    .await?;
                let not_held = |outcome| {
                    tracing::warn!(lock = %String::from_utf8_lossy(self.name()), token = short(&self.token), ?outcome, "fencing token refused: the lock is no longer ours");
                    self.state.mark_lost();
                    crate::Error::NotHeld {
                        name: String::from_utf8_lossy(self.name()).into_owned(),
                    }
                };
                let token = issued.map_err(not_held)?;
                // A lock made `with_replicas`: the counter too must reach them.
                match self
                    .lock
                    .confirm_replicas(&self.token, self.state.deadline())
                    .await?
                {
                    Replicated::Enough => Ok(token),
                    Replicated::TooFew(acked) => Err(self.lock.too_few_replicas(acked)),
                    Replicated::Gone(outcome) => Err(not_held(outcome)),
                }
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

    /// A handle on the [`lost`](LockGuard::lost) signal that outlives the
    /// borrow of the guard: clone it into the tasks that must stop when the
    /// lock is lost. Needs a tokio runtime: without the watchdog, a small
    /// task is started to fire it at the deadline.
    pub fn lost_signal(&self) -> LostSignal {
        self.state.lost_signal()
    }

    /// Resets the TTL to `ttl` from now, if we still own the lock; otherwise
    /// marks the guard lost. One round trip.
    ///
    /// # Cancel safety
    /// Cancel safe. If the future is dropped after the request was sent,
    /// Redis may have reset the TTL, but the guard's
    /// [`deadline`](LockGuard::deadline) stays where it was: the guard never
    /// assumes more than a reply proved, and the watchdog (if any) goes on.
    pub async fn extend(&self, ttl: Duration) -> Result<Ownership> {
        crate::vocab::names::check_ttl(ttl)?;
        let span = renew_span(self.lock.metrics_label.kind(), self.name(), &self.token);
        let result = self
            .lock
            .backend
            .extend(&self.lock.keys, &self.token, ttl)
            .instrument(span)
            .await;
        crate::vocab::metrics::renewal(
            &self.lock.metrics_label,
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
    /// deleted). A transient error (Redis restarting or failing over, no
    /// answer in time) is retried, by the one failure policy (`vocab/retry.rs`),
    /// while the hold's [`deadline`](Self::deadline) has not passed, so a
    /// release that lands in an outage still frees the lock when Redis is
    /// back instead of leaving it idle until its TTL; past the deadline it
    /// is tried once more in the background, and then the lock frees
    /// itself at its TTL. (A retry after a reply was lost may find the lock
    /// freed by the first request already: then it says `Expired`.) The
    /// guard is consumed either way.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before the reply was read
    /// (a `timeout` around it, a `select!`, a reconnecting connection), the
    /// release is finished in the background, as for a guard dropped
    /// without release; [`Client::flush`](crate::Client::flush) waits for it.
    pub async fn release(mut self) -> Result<Ownership> {
        self.release = ReleaseState::Sent;
        self.state.finish();
        crate::vocab::metrics::hold_time(&self.lock.metrics_label, self.acquired_at.elapsed());
        let mut retry = crate::vocab::retry::Retry::until(Some(self.state.deadline()));
        let result = loop {
            let span = release_span(self.lock.metrics_label.kind(), self.name(), &self.token);
            let release = crate::primitives::lock::release::release(
                &self.lock.backend,
                &self.lock.keys,
                &self.lock.local,
                &self.token,
                false,
            );
            // As in `Lock::try_acquire`: unwrapped without a subscriber for the span.
            let result = match span.is_disabled() {
                true => release.await,
                // Boxed: the release's future, moved into the span's, would
                // otherwise be carried twice by every release's future.
                false => Box::pin(release.instrument(span)).await,
            };
            match result {
                // Boxed: the rare retry's sleep is not carried by every release.
                Err(e) if e.is_transient() => {
                    let what = String::from_utf8_lossy(self.name()).into_owned();
                    match retry.failed(e, &what) {
                        Ok(delay) => Box::pin(tokio::time::sleep(delay)).await,
                        Err(e) => break Err(e),
                    }
                }
                other => break other,
            }
        };
        crate::vocab::metrics::release_outcome(
            &self.lock.metrics_label,
            result.as_ref().ok().copied(),
        );
        match result {
            Ok(outcome) => {
                self.release = ReleaseState::Done;
                if outcome != Ownership::Owned {
                    tracing::warn!(lock = %String::from_utf8_lossy(self.name()), token = short(&self.token), ?outcome, "release found the lock no longer ours");
                }
                Ok(outcome)
            }
            // The request may never have reached Redis: `Drop` tries once more
            // in the background (compare-and-delete, so never someone else's lock).
            Err(e) if e.is_transient() => {
                self.release = ReleaseState::Failed;
                Err(e)
            }
            Err(e) => {
                self.release = ReleaseState::Done;
                Err(e)
            }
        }
    }
}

/// The extension after a fair hand-off (see [`LockGuard::extend_after_handoff`]):
/// retried until the guard's deadline while Redis does not answer.
async fn extend_handed(
    backend: Backend,
    keys: Arc<LockKeys>,
    token: String,
    ttl: Duration,
    state: Arc<State>,
) {
    let done = state.done_token();
    loop {
        let extend = backend.extend(&keys, &token, ttl);
        let result = tokio::select! {
            _ = done.cancelled() => return,
            r = tokio::time::timeout_at(state.deadline().into(), extend) => r,
        };
        match result {
            Ok(Ok((Ownership::Owned, valid_until))) => {
                if valid_until > state.deadline() {
                    state.set_deadline(valid_until);
                }
                return;
            }
            Ok(Ok((outcome, _))) => {
                tracing::warn!(
                    token = short(&token),
                    ?outcome,
                    "a handed-over lock was gone before it was extended; lock lost"
                );
                state.mark_lost();
                return;
            }
            Ok(Err(_)) if Instant::now() < state.deadline() => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            // The deadline fires `lost` (the watchdog, if any, goes on).
            _ => return,
        }
    }
}

/// How far a guard's release got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReleaseState {
    /// Never asked: `Drop` releases in the background.
    NotAsked,
    /// Sent, reply not read (the future was dropped): `Drop` finishes it.
    Sent,
    /// Failed transiently (counted in the metrics): `Drop` tries once more.
    Failed,
    /// Answered, or failed for good: nothing left to do.
    Done,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        self.state.finish();
        // After a release this runs once the release has finished.
        self.lock.local.unhold();
        let why = match self.release {
            ReleaseState::Done => return,
            ReleaseState::Failed => "the release failed; trying once more",
            ReleaseState::Sent => {
                "the release was cancelled before its reply was read; finishing it"
            }
            ReleaseState::NotAsked => {
                crate::vocab::metrics::hold_time(
                    &self.lock.metrics_label,
                    self.acquired_at.elapsed(),
                );
                "lock guard dropped without release()"
            }
        };
        tracing::warn!(lock = %String::from_utf8_lossy(self.name()), token = short(&self.token), why, "releasing in the background");
        // A failed release was counted already; every other one is counted here.
        let counted =
            (self.release != ReleaseState::Failed).then(|| self.lock.metrics_label.clone());
        release_in_background(
            self.lock.backend.clone(),
            self.lock.keys.clone(),
            self.lock.local.clone(),
            std::mem::take(&mut self.token),
            why,
            counted,
            self.state.deadline(),
        );
    }
}
