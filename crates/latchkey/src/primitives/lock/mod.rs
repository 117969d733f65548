//! [`Lock`]: a named mutual-exclusion lock with a mandatory TTL.
//!
//! User docs (example, promises) are on the type.

pub(crate) mod attempt;
pub(crate) mod by_token;
pub(crate) mod cached;
pub(crate) mod fair;
pub(crate) mod guard;
pub(crate) mod release;
pub(crate) mod spec;
pub(crate) mod wait;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::primitives::lease::options::LeaseOptions;
use crate::primitives::lock::guard::LockGuard;
use crate::primitives::lock::spec::LockSpec;
#[cfg(doc)]
use crate::vocab::error::Error;
use crate::vocab::error::Result;
use crate::vocab::kind::Kind;
use crate::vocab::metrics::{LockLabel, Outcome};
use crate::vocab::names::{check_cluster_name, check_name, check_ttl, LockKeys};
use crate::vocab::outcome::AttemptMode;

/// A named lock with a TTL; a recipe, cheap to clone. Holding it is
/// represented by a [`LockGuard`]. Barging by default; [`Lock::fair`]
/// serves waiters in arrival order across processes.
///
/// Made by [`Client::lock`](crate::Client::lock).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let lock = client.lock("invoices", Duration::from_secs(10))?.with_watchdog();
///
/// let guard = lock.acquire_until(Duration::from_secs(5)).await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lost the lock: stop touching the invoices"),
///     _ = async { /* the critical section */ } => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// # What it promises
/// * **One holder at a time, owner-only**: acquiring is one
///   `SET key token NX PX ttl`; the token is 128 random bits from the OS,
///   so only the holder can release or extend the lock (compare-and-delete,
///   compare-and-pexpire), never someone else's.
/// * **Always expiring**: the TTL is mandatory, so a holder that dies frees
///   the lock within its TTL. A guard's [`deadline`](LockGuard::deadline)
///   says until when it may assume it holds the lock (measured from when
///   the request was *sent*, minus a drift allowance).
/// * **Self-healing, and honest when it is not**: the
///   [watchdog](Lock::with_watchdog) renews a held lock every `ttl / 3`,
///   and [`LockGuard::lost`] fires when the guard can no longer prove it
///   holds the lock, before the TTL could have run out.
/// * **Fenced**: every hold can get a [fencing token](LockGuard::fencing_token)
///   greater than those of all earlier holds, for a resource that rejects
///   stale writers ([`FencedResource`](crate::FencedResource)).
/// * **Woken, not polled**: a waiter sleeps until a release message (one
///   shared pub/sub connection per client) or the holder's TTL. Waiters of
///   one process are served in arrival order (one of them contends with
///   Redis at a time); across processes the lock is **barging** (the woken
///   waiters race) unless it is made [`fair`](Lock::fair).
///
/// # Limits
/// A lock with a TTL can be held by two processes at once when the first
/// pauses (GC, swap, `SIGSTOP`) or is cut off past its TTL: `deadline` and
/// `lost` narrow that window, and only a resource that checks fencing
/// tokens closes it. A Redis that loses the key (a failover to a replica
/// that had not received it, a restart without persistence) frees the lock
/// early; [`with_replicas`](Lock::with_replicas) and
/// [`Redlock`](crate::Redlock) narrow that (`docs/reliability.md`).
#[derive(Clone)]
pub struct Lock {
    /// Shared: a guard keeps a clone, and one reference count per guard
    /// costs less than one per field.
    pub(crate) inner: Arc<LockSpec>,
}

impl Lock {
    /// See [`Client::lock`](crate::Client::lock).
    pub(crate) fn new(backend: Backend, name: &[u8], ttl: Duration) -> Result<Lock> {
        check_name(name)?;
        check_cluster_name(backend.prefix(), name, backend.is_cluster())?;
        check_ttl(ttl)?;
        let keys = LockKeys::new(backend.prefix(), name);
        Ok(Lock {
            inner: Arc::new(LockSpec {
                local: backend.local_queues().slot(&keys.key),
                keys: Arc::new(keys),
                metrics_label: LockLabel::new(backend.metrics_labels(), Kind::Lock, name),
                backend,
                name: Arc::from(name),
                lease: LeaseOptions::new(ttl),
                fair_lease: None,
                replicas: None,
                caching: false,
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
    /// acquisition is a bare `SET NX PX` (less server time than the script;
    /// the figures are in `docs/fencing.md`), and a Redlock's
    /// acquisition saves that on every instance, and the strict fencing
    /// round. Both kinds of token are ordered the same way:
    /// a token is only issued while its hold lasts, so it is smaller than
    /// every token of a later hold.
    pub fn with_fencing(mut self) -> Self {
        Arc::make_mut(&mut self.inner).lease.fenced = true;
        self
    }

    /// Keeps every guard of this lock alive in the background, renewing it
    /// every `ttl / 3` (up to a quarter of that earlier: the renewals of a
    /// process's holds due together share one pipelined round trip per
    /// server). See [`Lock::with_renewal_every`].
    pub fn with_watchdog(mut self) -> Self {
        let every = self.inner.lease.ttl / 3;
        Arc::make_mut(&mut self.inner).lease.renew_every = Some(every);
        self
    }

    crate::primitives::builder::lease_limits! {
        "lock", "hold",
        /// Keeps every guard of this lock alive in the background, renewing it
        /// every `every` (which must be shorter than the TTL minus the drift
        /// allowance; a third of the TTL is a good choice: two renewals may fail
        /// before the lease runs out).
        ///
        /// The watchdog stops when the guard is released or dropped. When it can
        /// no longer prove ownership, the guard's [`lost`](LockGuard::lost)
        /// signal fires: at once when a renewal finds the lock gone or taken,
        /// and at the validity deadline when renewals keep failing.
    }

    /// Makes every waiting acquisition of this lock ask its holder to let
    /// go (cooperative revocation from the waiter's side): when the lock is
    /// busy, the waiter sends the request of
    /// [`Client::request_release`](crate::Client::request_release) (the
    /// holder's [`release_requested`](LockGuard::release_requested)
    /// completes; a `latchkey run` holder stops its command), then waits as
    /// usual. It asks each holder once: at the first wait, and again only
    /// when another holder has the lock by then (a holder it named in the
    /// same round trip as its attempt), never on every wake-up. Nothing
    /// changes on the way to a free lock: a first try sends what it always
    /// does, and only a busy lock costs the request (one `PUBLISH`).
    ///
    /// A [fair](Lock::fair) waiter asks once, at its first wait (the queue
    /// decides who holds next); a [`Redlock`](crate::Redlock) waiter asks on
    /// every instance, at its first wait and after each release it lost the
    /// race for. A waiter whose holder is a guard of its own client asks it
    /// as any other (it then waits through Redis, not only for the local
    /// release).
    pub fn with_asking(mut self) -> Self {
        Arc::make_mut(&mut self.inner).lease.asking = true;
        self
    }

    /// Makes every acquisition wait until `n` replicas of the lock's server
    /// acknowledge it (`WAIT n`), at most [`DEFAULT_REPLICA_TIMEOUT`](crate::limits::DEFAULT_REPLICA_TIMEOUT);
    /// see [`Lock::with_replicas_within`].
    pub fn with_replicas(self, n: usize) -> Result<Self> {
        self.with_replicas_within(n, crate::backend::replicas::DEFAULT_REPLICA_TIMEOUT)
    }

    /// Makes every acquisition wait, at most `timeout`, until `n` replicas
    /// of the lock's server acknowledge it: after the lock (and, with
    /// [`with_fencing`](Lock::with_fencing), its fencing token) is taken, a
    /// write of ours that finds the lock still ours (the extend script,
    /// which leaves its expiry where the acquisition put it) and `WAIT n
    /// timeout` are sent together on one connection, to the server that
    /// holds the key (on a Redis Cluster, the primary of the key's slot).
    /// `WAIT` counts the acknowledgements of its own connection's writes: a
    /// bare `WAIT` on a connection replaced after the acquisition (a
    /// reconnect, a Sentinel failover) would count replicas that never saw
    /// the lock. When fewer acknowledge in time, or the lock is no longer
    /// there, the lock is released again and the acquisition fails with
    /// [`Error::TooFewReplicas`] (a waiting acquire retries it, as any
    /// transient error, until its deadline). `n = 0` turns this off.
    ///
    /// A [fair](Lock::fair) lock confirms each hold the same way, taken or
    /// handed on (a hand-off too few acknowledge is handed on to the next
    /// waiter, and the waiter queues again); a fencing token issued later
    /// on request ([`LockGuard::fencing_token`]) waits for the replicas too.
    ///
    /// This makes losing a lock in a failover rare, not impossible: `WAIT`
    /// does not make Redis consistent (see `docs/reliability.md`,
    /// "Replicated acquisition"). Renewals do not wait. A `WAIT` that runs
    /// into its timeout holds the client's other commands back as long
    /// (they share its connection). An acquisition cancelled while it waits
    /// for the replicas releases the lock in the background, as any
    /// cancelled acquisition does (see [`Lock::try_acquire`]).
    ///
    /// Fails with [`Error::InvalidInput`] for a Redlock (each instance is
    /// its own primary), or a timeout that is zero or not shorter than the
    /// client's command timeout.
    pub fn with_replicas_within(mut self, n: usize, timeout: Duration) -> Result<Self> {
        crate::backend::replicas::check(&self.inner.backend, timeout)?;
        Arc::make_mut(&mut self.inner).replicas = (n > 0).then_some((n, timeout));
        Ok(self)
    }

    /// The lock's name.
    pub fn name(&self) -> &[u8] {
        &self.inner.name
    }

    /// The lock's TTL.
    pub fn ttl(&self) -> Duration {
        self.inner.lease.ttl
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
        let spec = &self.inner;
        crate::primitives::traced::first_try(
            &spec.metrics_label,
            &spec.name,
            self.try_acquire_once(),
        )
        .await
    }

    /// Waits as long as it takes. See [`Lock::acquire_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Lock::acquire_until`].
    pub async fn acquire(&self) -> Result<LockGuard> {
        self.acquire_by(None).await
    }

    /// Waits at most `wait`, then fails with [`Error::WaitTimedOut`]. See
    /// [`Lock::acquire_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Lock::acquire_until`].
    #[deprecated(
        since = "0.4.0",
        note = "use `acquire_until`, which takes a Duration (from now) as well as an Instant"
    )]
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<LockGuard> {
        self.acquire_by(crate::primitives::wait::deadline_after(wait))
            .await
    }

    /// Waits until the lock is ours or `deadline` passes ([`Error::WaitTimedOut`]).
    /// Transient Redis errors (unreachable,
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
    /// subscription are given up. A [fair](Lock::fair) waiter leaves the
    /// queue in Redis in the background, handing on a lock handed to it in
    /// that instant ([`Client::flush`](crate::Client::flush) waits for it);
    /// one that times out leaves before returning.
    pub async fn acquire_until(
        &self,
        deadline: impl Into<crate::vocab::deadline::Deadline>,
    ) -> Result<LockGuard> {
        self.acquire_by(deadline.into().instant()).await
    }

    /// [`Lock::acquire_until`] with an optional deadline (`None`: as long
    /// as it takes): what `acquire`, `acquire_timeout` and `acquire_until`
    /// run.
    pub(crate) async fn acquire_by(&self, deadline: Option<Instant>) -> Result<LockGuard> {
        let spec = &self.inner;
        // Boxed once here: the wrappers below move the call's future into
        // theirs, and this one is large (a first try's request inside); a
        // pointer moves for less than the copies cost (callgrind, 64 tasks
        // cycling: `memcpy` 3,000 → 2,270 instructions a cycle).
        let call = Box::pin(self.acquire_until_once(deadline));
        crate::primitives::traced::acquire(
            &spec.metrics_label,
            &spec.name,
            crate::primitives::wait::bounded(deadline, call),
            Outcome::of_wait,
        )
        .await
    }

    async fn acquire_until_once(&self, deadline: Option<Instant>) -> Result<LockGuard> {
        let started = Instant::now();
        if self.inner.fair_lease.is_some() {
            return Box::pin(self.fair_acquire_replicated(deadline, started)).await;
        }
        let releases = self.inner.local.releases();
        // The uncontended case costs one round trip and no subscription. If
        // another task of ours already waits, the lock is busy: queue up
        // behind it (FIFO) instead of spending a round trip to learn that.
        // (Not behind a hold this client keeps idle: that one is told.)
        let mut kept_idle = false;
        if !self.inner.local.is_contended() || self.inner.local.is_kept_idle() {
            let _arriving = self.inner.local.arrive();
            match self.first_try().await {
                Ok(Ok(guard)) => return Ok(guard),
                Ok(Err(busy)) => kept_idle = busy.kept_idle,
                Err(e) if e.is_transient() => {}
                Err(e) => return Err(e),
            }
        }
        let waiting = self.wait_and_acquire(deadline, started, releases, kept_idle);
        // Boxed: the rare wait's future is not carried by every acquire's.
        let waiting = Box::pin(waiting);
        crate::primitives::traced::wait(&self.inner.metrics_label, &self.inner.name, waiting).await
    }

    pub(crate) fn attempt_mode(&self, ask_ttl: bool, mark: bool) -> AttemptMode {
        AttemptMode {
            fenced: self.inner.lease.fenced,
            ask_ttl,
            mark,
            register: mark && !matches!(self.inner.backend, crate::backend::Backend::Redlock(_)),
            holder: self.inner.lease.asking,
        }
    }
}

crate::primitives::builder::hold_options_impl!(Lock);
