//! [`Lock`]: a named mutual-exclusion lock with a mandatory TTL.
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! use std::time::Duration;
//! let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
//! let lock = client.lock("invoices", Duration::from_secs(10))?.with_watchdog();
//!
//! let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
//! tokio::select! {
//!     _ = guard.lost() => eprintln!("lost the lock: stop touching the invoices"),
//!     _ = async { /* the critical section */ } => {}
//! }
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! # How waiting works
//! A waiter first tries once. If the lock is busy it queues behind the other
//! tasks of its client that wait for the same name (only the head of that
//! local queue talks to Redis), subscribes to the lock's release channel
//! through the client's shared subscriber, tries again, and then sleeps until
//! a release message arrives *or* the holder's remaining TTL (returned by the
//! failed attempt) runs out, whichever comes first — so a holder that died
//! without releasing costs its waiters at most its TTL. Pub/sub is only a
//! hint: a missed message costs time, never safety. When pub/sub is
//! unavailable, waiters poll with jittered backoff (10 ms doubling to
//! 500 ms) and say so in a log line.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::metrics::{LockLabel, MetricsLabels, Outcome};
use crate::names::{check_name, check_ttl, LockKeys};
pub(crate) use crate::outcome::{Attempt, AttemptMode, Ownership};
use crate::queue::LocalSlot;
use crate::subscriber::{jitter, Event, Subscription, Topic};

/// Where locks live. Every variant offers the same three operations, so the
/// waiting, guard and watchdog logic above them is written once.
#[derive(Clone)]
pub(crate) enum Backend {
    Single(Client),
    Redlock(crate::redlock::Redlock),
}

impl Backend {
    pub(crate) fn prefix(&self) -> &[u8] {
        match self {
            Backend::Single(client) => client.prefix(),
            Backend::Redlock(redlock) => redlock.prefix(),
        }
    }

    fn metrics_labels(&self) -> &MetricsLabels {
        match self {
            Backend::Single(client) => &client.inner.metrics_labels,
            Backend::Redlock(redlock) => redlock.metrics_labels(),
        }
    }

    pub(crate) async fn try_once(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
        mode: AttemptMode,
    ) -> Result<Attempt> {
        match self {
            Backend::Single(client) => client.try_once(keys, token, ttl, mode).await,
            Backend::Redlock(redlock) => redlock.try_once(keys, token, ttl, mode).await,
        }
    }

    /// Issues the fencing token of the hold of `token` if it is still held
    /// (and, for a Redlock, still valid at `valid_until`); otherwise says
    /// why not.
    pub(crate) async fn issue_fence(
        &self,
        keys: &LockKeys,
        token: &str,
        valid_until: Instant,
    ) -> Result<std::result::Result<u64, Ownership>> {
        match self {
            Backend::Single(client) => client.issue_fence_once(keys, token).await,
            Backend::Redlock(redlock) => redlock.issue_fence(keys, token, valid_until).await,
        }
    }

    /// Owner-only release. `cleanup`: it finishes what a failure or a
    /// cancellation left (sent as the whole script, see
    /// `Client::release_whole`), and no local waiter is woken ahead of it.
    pub(crate) async fn release(
        &self,
        keys: &LockKeys,
        token: &str,
        cleanup: bool,
    ) -> Result<Ownership> {
        let outcome = match self {
            Backend::Single(client) if cleanup => {
                let outcome = client.release_whole(keys, token).await?;
                if outcome == Ownership::Owned {
                    self.wake_local(keys);
                }
                outcome
            }
            Backend::Single(client) => {
                // Send the release, then wake this client's next waiter before
                // the reply is back: its attempt travels on the same
                // connection right behind the release, and Redis runs them in
                // order, so a local handoff costs one round trip, not two. A
                // wake-up for a release that then fails is harmless: the
                // waiter finds the lock busy and waits again.
                let mut release = std::pin::pin!(client.release_once(keys, token));
                let first_poll =
                    std::future::poll_fn(|cx| Poll::Ready(release.as_mut().poll(cx))).await;
                match first_poll {
                    Poll::Ready(outcome) => {
                        let outcome = outcome?;
                        if outcome == Ownership::Owned {
                            self.wake_local(keys);
                        }
                        outcome
                    }
                    Poll::Pending => {
                        self.wake_local(keys);
                        release.await?
                    }
                }
            }
            Backend::Redlock(redlock) => {
                let outcome = redlock.release_all(keys, token, cleanup).await?;
                if outcome == Ownership::Owned {
                    self.wake_local(keys);
                }
                outcome
            }
        };
        Ok(outcome)
    }

    pub(crate) async fn extend(
        &self,
        keys: &LockKeys,
        token: &str,
        ttl: Duration,
    ) -> Result<(Ownership, Instant)> {
        match self {
            Backend::Single(client) => client.extend_once(keys, token, ttl).await,
            Backend::Redlock(redlock) => redlock.extend_all(keys, token, ttl).await,
        }
    }

    /// Subscribes to the release channel(s) of a lock.
    async fn wakeups(&self, keys: &LockKeys) -> Result<Wakeups> {
        match self {
            Backend::Single(client) => {
                let topic = Topic::Channel(keys.channel.clone());
                Ok(Wakeups(vec![client.subscriber().subscribe(topic).await?]))
            }
            Backend::Redlock(redlock) => Ok(Wakeups(redlock.subscriptions(keys).await?)),
        }
    }

    /// Wakes this process's waiters for `keys` at once after a local release.
    fn wake_local(&self, keys: &LockKeys) {
        match self {
            Backend::Single(client) => {
                if let Some(subscriber) = client.subscriber_if_started() {
                    subscriber
                        .notify_local(&Topic::Channel(keys.channel.clone()), Event::LocalRelease);
                }
            }
            Backend::Redlock(redlock) => redlock.wake_local(keys),
        }
    }

    fn local_queues(&self) -> &crate::queue::LocalQueues {
        match self {
            Backend::Single(client) => &client.inner.local_queues,
            Backend::Redlock(redlock) => redlock.local_queues(),
        }
    }

    /// Where background work for this backend's locks (releases of dropped
    /// guards, cancelled attempts and releases) is tracked, so that
    /// `flush` can wait for it.
    pub(crate) fn background(&self) -> &tokio_util::task::TaskTracker {
        match self {
            Backend::Single(client) => &client.inner.background,
            Backend::Redlock(redlock) => redlock.background(),
        }
    }

    fn new_token(&self) -> Result<String> {
        match self {
            Backend::Single(client) => client.inner.identity.new_token(),
            Backend::Redlock(redlock) => redlock.new_token(),
        }
    }
}

/// Release notifications from one or more servers.
struct Wakeups(Vec<Subscription>);

impl Wakeups {
    /// Forgets events received so far: called right before an attempt, so
    /// that only what happens after it counts as a wake-up.
    fn reset(&mut self) {
        for subscription in &mut self.0 {
            subscription.skip_pending();
        }
    }

    /// Completes on the next event from any server.
    async fn next(&mut self) -> Event {
        let events = self.0.iter_mut().map(|s| Box::pin(s.recv()));
        let (event, _, _) = futures_util::future::select_all(events).await;
        event
    }
}

/// A named lock with a TTL; a recipe, cheap to clone. Holding it is
/// represented by a [`LockGuard`].
///
/// Made by [`Client::lock`].
#[derive(Clone)]
pub struct Lock {
    /// Shared: a guard keeps a clone, and one reference count per guard
    /// costs less than one per field.
    pub(crate) inner: Arc<LockInner>,
}

/// What a [`Lock`] is.
#[derive(Clone)]
pub(crate) struct LockInner {
    pub(crate) backend: Backend,
    pub(crate) name: Arc<[u8]>,
    pub(crate) keys: Arc<LockKeys>,
    pub(crate) ttl: Duration,
    pub(crate) renew_every: Option<Duration>,
    /// Whether every acquisition also issues the fencing token (one script
    /// instead of a bare `SET`): see [`Lock::with_fencing`].
    pub(crate) fenced: bool,
    /// The `lock` label of this lock's metrics, computed once.
    pub(crate) metrics_label: LockLabel,
    /// This client's queue and guard count for the name, looked up once.
    pub(crate) local: Arc<LocalSlot>,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &String::from_utf8_lossy(&self.inner.name))
            .field("ttl", &self.inner.ttl)
            .field("renew_every", &self.inner.renew_every)
            .field("fenced", &self.inner.fenced)
            .finish()
    }
}

impl Client {
    /// A lock called `name` whose holder owns it for at most `ttl` unless it
    /// extends it (by hand or with the [watchdog](Lock::with_watchdog)).
    ///
    /// Fails with [`Error::InvalidName`] for an empty name, one longer than
    /// [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) bytes or ending in `:fence`, and
    /// with [`Error::InvalidTtl`] for a TTL outside
    /// [`MIN_TTL`](crate::MIN_TTL)..=[`MAX_TTL`](crate::MAX_TTL). Any other
    /// bytes are fine in a name.
    pub fn lock(&self, name: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock> {
        Lock::new(Backend::Single(self.clone()), name.as_ref(), ttl)
    }
}

impl Lock {
    pub(crate) fn new(backend: Backend, name: &[u8], ttl: Duration) -> Result<Lock> {
        check_name(name)?;
        check_ttl(ttl)?;
        let keys = LockKeys::new(backend.prefix(), name);
        Ok(Lock {
            inner: Arc::new(LockInner {
                local: backend.local_queues().slot(&keys.key),
                keys: Arc::new(keys),
                metrics_label: LockLabel::new(backend.metrics_labels(), name),
                backend,
                name: Arc::from(name),
                ttl,
                renew_every: None,
                fenced: false,
            }),
        })
    }

    /// Issues the [fencing token](LockGuard::fencing_token) with every
    /// acquisition, in the same round trip, for code that uses a token on
    /// every hold.
    ///
    /// Without this, a guard's token is issued on its first
    /// [`fencing_token`](LockGuard::fencing_token) call (one more round trip
    /// then), and a hold that never asks costs Redis no script: the
    /// acquisition is a bare `SET NX PX` (about 1 µs of server time against
    /// 4–9 µs for the script; see `docs/fencing.md`), and a Redlock's
    /// acquisition saves that on every instance, and the strict fencing
    /// round. Both kinds of token are ordered the same way:
    /// a token is only issued while its hold lasts, so it is smaller than
    /// every token of a later hold.
    pub fn with_fencing(mut self) -> Self {
        Arc::make_mut(&mut self.inner).fenced = true;
        self
    }

    /// Keeps every guard of this lock alive in the background, renewing it
    /// every `ttl / 3`. See [`Lock::renew_every`].
    pub fn with_watchdog(mut self) -> Self {
        let every = self.inner.ttl / 3;
        Arc::make_mut(&mut self.inner).renew_every = Some(every);
        self
    }

    /// Keeps every guard of this lock alive in the background, renewing it
    /// every `every` (which must be shorter than the TTL minus the drift
    /// allowance; a third of the TTL is a good choice: two renewals may fail
    /// before the lease runs out).
    ///
    /// The watchdog stops when the guard is released or dropped. When it can
    /// no longer prove ownership, the guard's [`lost`](LockGuard::lost)
    /// signal fires: at once when a renewal finds the lock gone or taken,
    /// and at the validity deadline when renewals keep failing.
    pub fn renew_every(mut self, every: Duration) -> Result<Self> {
        if every.is_zero() || every >= self.inner.ttl - crate::names::drift(self.inner.ttl) {
            return Err(Error::InvalidTtl {
                ttl: every,
                reason: "the renewal interval must be positive and shorter than the TTL minus the drift allowance",
            });
        }
        Arc::make_mut(&mut self.inner).renew_every = Some(every);
        Ok(self)
    }

    /// The lock's name.
    pub fn name(&self) -> &[u8] {
        &self.inner.name
    }

    /// The lock's TTL.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// The Redis key holding the lock (prefix + name).
    pub fn key(&self) -> &[u8] {
        &self.inner.keys.key
    }

    /// Tries once: `Ok(Some(guard))` if we now hold the lock, `Ok(None)` if
    /// someone else does. One round trip.
    ///
    /// # Cancel safety
    /// If the future is dropped after the request was sent but before the
    /// reply was read, the lock may have been taken for us without our
    /// knowing. A best-effort release (compare-and-delete with our token) is
    /// then spawned, so the lock is not left held until its TTL; if that
    /// release cannot run (no runtime, Redis gone) the lock frees itself at
    /// the TTL.
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>> {
        let called = Instant::now();
        let span = self.span_acquire();
        let result = self.try_acquire_once().instrument(span.clone()).await;
        if let Ok(Some(guard)) = &result {
            span.record("token", crate::token::short(guard.token()));
        }
        crate::metrics::acquire_outcome(
            &self.inner.metrics_label,
            Outcome::of_try(&result),
            called.elapsed(),
        );
        result
    }

    /// `try_acquire` without metrics and span: also the first step of a wait.
    async fn try_acquire_once(&self) -> Result<Option<LockGuard>> {
        let token = self.inner.backend.new_token()?;
        let pending = PendingAttempt {
            lock: self,
            token: Some(&token),
        };
        let attempt = self
            .inner
            .backend
            .try_once(
                &self.inner.keys,
                &token,
                self.inner.ttl,
                self.attempt_mode(false),
            )
            .await;
        match attempt? {
            Attempt::Acquired {
                fencing_token,
                valid_until,
            } => {
                pending.disarm();
                Ok(Some(LockGuard::new(
                    self.clone(),
                    token,
                    fencing_token,
                    valid_until,
                )))
            }
            Attempt::Busy { .. } => {
                pending.disarm();
                Ok(None)
            }
        }
    }

    /// Waits as long as it takes. See [`Lock::acquire_until`].
    pub async fn acquire(&self) -> Result<LockGuard> {
        self.acquire_until(None).await
    }

    /// Waits at most `wait`, then fails with [`Error::WaitTimedOut`]. See
    /// [`Lock::acquire_until`].
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<LockGuard> {
        self.acquire_until(Some(Instant::now() + wait)).await
    }

    /// Waits until the lock is ours or `deadline` passes ([`Error::WaitTimedOut`]);
    /// `None` waits as long as it takes. Transient Redis errors (unreachable,
    /// timeout) during the wait are retried with backoff until the deadline;
    /// without a deadline, an error that persists for 30 s is returned.
    /// [`Error::WaitTimedOut`] means the lock was busy: when the last attempt
    /// before the deadline could not reach Redis (or, for a
    /// [`Redlock`](crate::Redlock), a majority of instances), that error
    /// ([`Error::Unreachable`], [`Error::Timeout`], [`Error::NoQuorum`]) is
    /// returned instead, so an outage is never reported as a conflict.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves no lock behind. A lock taken
    /// by a request whose reply was never read is released in the
    /// background (see [`Lock::try_acquire`]); the local queue place and the
    /// subscription are given up.
    pub async fn acquire_until(&self, deadline: Option<Instant>) -> Result<LockGuard> {
        let called = Instant::now();
        let span = self.span_acquire();
        let result = self
            .acquire_until_once(deadline)
            .instrument(span.clone())
            .await;
        if let Ok(guard) = &result {
            span.record("token", crate::token::short(guard.token()));
        }
        crate::metrics::acquire_outcome(
            &self.inner.metrics_label,
            Outcome::of_wait(&result),
            called.elapsed(),
        );
        result
    }

    /// The span of one acquire call; its token is recorded once held.
    fn span_acquire(&self) -> tracing::Span {
        tracing::debug_span!("acquire", lock = %String::from_utf8_lossy(&self.inner.name), token = tracing::field::Empty)
    }

    async fn acquire_until_once(&self, deadline: Option<Instant>) -> Result<LockGuard> {
        let started = Instant::now();
        // The uncontended case costs one round trip and no subscription. If
        // another task of ours already waits, the lock is busy: queue up
        // behind it (FIFO) instead of spending a round trip to learn that.
        if !self.inner.local.is_contended() {
            match self.try_acquire_once().await {
                Ok(Some(guard)) => return Ok(guard),
                Ok(None) => {}
                Err(e) if e.is_transient() => {}
                Err(e) => return Err(e),
            }
        }
        let span = tracing::debug_span!("wait", lock = %String::from_utf8_lossy(&self.inner.name), token = tracing::field::Empty);
        self.wait_and_acquire(deadline, started)
            .instrument(span)
            .await
    }

    /// The slow path of [`Lock::acquire_until`]: the lock was busy.
    async fn wait_and_acquire(
        &self,
        deadline: Option<Instant>,
        started: Instant,
    ) -> Result<LockGuard> {
        let timed_out = || Error::WaitTimedOut {
            name: String::from_utf8_lossy(&self.inner.name).into_owned(),
            waited: started.elapsed(),
        };
        // Subscribe before queueing: the server-side subscription is shared,
        // so waiters taking turns do not SUBSCRIBE/UNSUBSCRIBE on every handoff.
        // A subscriber that is slow to answer must not carry us past the
        // deadline: then we poll instead.
        let subscribing = self.subscribe_or_poll(None);
        let mut wakeups = match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), subscribing)
                .await
                .unwrap_or(None),
            None => subscribing.await,
        };
        let mut last_subscribe = Instant::now();
        let turn = self.inner.local.turn();
        let _turn = match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), turn)
                .await
                .map_err(|_| timed_out())?,
            None => turn.await,
        };

        let mut poll = MIN_POLL;
        let mut failing_since: Option<Instant> = None;
        // When a release notification woke us: the start of a handoff.
        let mut woken_at: Option<Instant> = None;
        loop {
            // A wait whose last attempt could not reach Redis (or a Redlock
            // majority) reports that at the deadline rather than "still
            // busy", which would be untrue: an outage is not a conflict.
            let mut unreachable: Option<Error> = None;
            if let Some(w) = wakeups.as_mut() {
                w.reset();
            }
            let retry_in = match self.try_acquire_with_ttl().await {
                Ok(Ok(guard)) => {
                    if let Some(woken_at) = woken_at {
                        crate::metrics::handoff(&self.inner.metrics_label, woken_at.elapsed());
                    }
                    return Ok(guard);
                }
                Ok(Err(retry_in)) => {
                    failing_since = None;
                    retry_in
                }
                Err(e) if e.is_transient() => {
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    if deadline.is_none() && since.elapsed() >= GIVE_UP_AFTER {
                        return Err(e);
                    }
                    tracing::warn!(lock = %String::from_utf8_lossy(&self.inner.name), error = %e, "acquire attempt failed; retrying");
                    unreachable = Some(e);
                    poll = (poll * 2).min(MAX_POLL);
                    Some(poll)
                }
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(unreachable.take().unwrap_or_else(timed_out));
            }
            if wakeups.is_none() && now - last_subscribe >= Duration::from_secs(1) {
                wakeups = self.subscribe_or_poll(Some(&wakeups)).await;
                last_subscribe = now;
            }
            // With wake-ups, sleep until the holder's TTL runs out (a release
            // message ends the sleep sooner). Without, poll.
            let mut sleep = match (retry_in, wakeups.is_some()) {
                (Some(ttl_left), true) => ttl_left + Duration::from_millis(1),
                (Some(ttl_left), false) => (ttl_left + Duration::from_millis(1)).min(jitter(poll)),
                (None, _) => jitter(poll),
            };
            if wakeups.is_none() || retry_in.is_none() {
                poll = (poll * 2).min(MAX_POLL);
            }
            if failing_since.is_some() {
                sleep = jitter(poll);
            }
            let mut wake_at = Instant::now() + sleep;
            if let Some(d) = deadline {
                wake_at = wake_at.min(d);
            }
            woken_at = None;
            match wakeups.as_mut() {
                Some(w) => {
                    tokio::select! {
                        event = w.next() => {
                            if !matches!(event, Event::Resubscribed) {
                                woken_at = Some(Instant::now());
                            }
                        }
                        _ = tokio::time::sleep_until(wake_at.into()) => {}
                    }
                }
                None => tokio::time::sleep_until(wake_at.into()).await,
            }
        }
    }

    fn attempt_mode(&self, ask_ttl: bool) -> AttemptMode {
        AttemptMode {
            fenced: self.inner.fenced,
            ask_ttl,
        }
    }

    /// Like `try_acquire`, but a busy lock returns the holder's TTL left.
    async fn try_acquire_with_ttl(&self) -> Result<Result<LockGuard, Option<Duration>>> {
        let token = self.inner.backend.new_token()?;
        let pending = PendingAttempt {
            lock: self,
            token: Some(&token),
        };
        let attempt = self
            .inner
            .backend
            .try_once(
                &self.inner.keys,
                &token,
                self.inner.ttl,
                self.attempt_mode(true),
            )
            .await?;
        pending.disarm();
        Ok(match attempt {
            Attempt::Acquired {
                fencing_token,
                valid_until,
            } => Ok(LockGuard::new(
                self.clone(),
                token,
                fencing_token,
                valid_until,
            )),
            Attempt::Busy { retry_in } => Err(retry_in),
        })
    }

    async fn subscribe_or_poll(&self, previous: Option<&Option<Wakeups>>) -> Option<Wakeups> {
        match self.inner.backend.wakeups(&self.inner.keys).await {
            Ok(w) => {
                if previous.is_some() {
                    tracing::info!(lock = %String::from_utf8_lossy(&self.inner.name), "pub/sub is back; waiting for wake-ups again");
                }
                Some(w)
            }
            Err(e) => {
                if previous.is_none() {
                    tracing::warn!(lock = %String::from_utf8_lossy(&self.inner.name), error = %e, "pub/sub unavailable; falling back to polling with backoff");
                }
                None
            }
        }
    }
}

const MIN_POLL: Duration = Duration::from_millis(10);
const MAX_POLL: Duration = Duration::from_millis(500);
const GIVE_UP_AFTER: Duration = Duration::from_secs(30);

/// Releases, in the background, a lock that an attempt may have taken if the
/// attempt is dropped (cancelled) or fails before its reply was understood.
struct PendingAttempt<'a> {
    lock: &'a Lock,
    token: Option<&'a str>,
}

impl PendingAttempt<'_> {
    fn disarm(mut self) {
        self.token = None;
    }
}

impl Drop for PendingAttempt<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token {
            crate::guard::release_in_background(
                self.lock.inner.backend.clone(),
                self.lock.inner.keys.clone(),
                token.to_owned(),
                "an acquire attempt was cancelled or failed after its request was sent",
                None,
            );
        }
    }
}
