//! [`RwLock`]: many readers or one writer, across processes; each hold a
//! lease, and neither side starved.
//!
//! User docs (example, the policy) are on the type.
//!
//! The layout and scripts are in `docs/protocol.md`, "Read-write locks".

pub(crate) mod guard;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::primitives::rwlock::guard::{RwAccess, RwGuard, RwSpec};
use crate::primitives::shared::{in_background, key, Waker};
use crate::primitives::traced;
use crate::vocab::error::{Error, Result};
use crate::vocab::metrics::{LockLabel, Outcome, Primitive};
use crate::vocab::names::{check_cluster_name, check_name, check_ttl, drift, ttl_ms};
use crate::vocab::protocol::scripts;
use crate::vocab::protocol::RWLOCK_SUFFIXES;
use crate::vocab::retry::Retry;

/// A read-write lock: many readers or one writer, across processes; each
/// hold a lease, and neither side starved. A recipe called by name, cheap
/// to clone; made by [`Client::rwlock`](crate::Client::rwlock).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let catalog = client
///     .rwlock("catalog", Duration::from_secs(10))?
///     .with_watchdog()
///     .with_fencing();
///
/// // Any number of readers at once:
/// let reading = catalog.read_timeout(Duration::from_secs(5)).await?;
/// // ... read the catalog ...
/// reading.release().await?;
///
/// // One writer, alone:
/// let writing = catalog.write_timeout(Duration::from_secs(30)).await?;
/// println!("writing with fencing token {:?}", writing.fencing_token());
/// writing.release().await?;
/// # Ok(()) }
/// ```
///
/// # The policy: phase-fair, no starvation either way
/// * **A waiting writer stops new readers from entering**: its intent is
///   recorded in Redis (refreshed while it waits, gone at the TTL if it
///   dies), and readers that come after it wait. The readers inside finish
///   (or their leases run out), and the writer gets in: a writer behind a
///   stream of short readers waits at most for the readers already inside,
///   within one reader TTL unless they renew.
/// * **A writer's release lets in the readers waiting at that moment**,
///   all of them, before the next writer (even one that waited longer):
///   readers are not starved by a stream of writers either. Readers and
///   writers alternate in phases.
/// * Each reader's hold is its own lease (renewed by the watchdog, lost on
///   its own); the writer's too. A writer's hold can carry a fencing token,
///   greater than that of every earlier writer.
/// * Waiting is woken by a message on every release, and at the earliest
///   expiry that could let the waiter in; not FIFO within a phase.
#[derive(Clone)]
pub struct RwLock {
    inner: Arc<RwSpec>,
}

impl std::fmt::Debug for RwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLock")
            .field("name", &String::from_utf8_lossy(&self.inner.name))
            .field("ttl", &self.inner.ttl)
            .field("renew_every", &self.inner.renew_every)
            .field("fenced", &self.inner.fenced)
            .finish()
    }
}

impl RwLock {
    /// See [`Client::rwlock`](crate::Client::rwlock).
    pub(crate) fn on_session(
        session: &crate::transport::session::Session,
        name: &[u8],
        ttl: Duration,
    ) -> Result<RwLock> {
        check_name(name)?;
        check_cluster_name(session.prefix(), name, session.is_cluster())?;
        check_ttl(ttl)?;
        let keys = RWLOCK_SUFFIXES.map(|suffix| key(session, name, suffix));
        Ok(RwLock {
            inner: Arc::new(RwSpec {
                session: session.clone(),
                name: Arc::from(name),
                keys: Arc::new(keys),
                ttl,
                renew_every: None,
                fenced: false,
                metrics_label: LockLabel::new(
                    &session.inner.metrics_labels,
                    Primitive::RwLock,
                    name,
                ),
            }),
        })
    }

    /// Renews every hold of this lock in the background every `ttl / 3`.
    pub fn with_watchdog(mut self) -> Self {
        let every = self.inner.ttl / 3;
        Arc::make_mut(&mut self.inner).renew_every = Some(every);
        self
    }

    /// Issues a fencing token with every writer's hold.
    pub fn with_fencing(mut self) -> Self {
        Arc::make_mut(&mut self.inner).fenced = true;
        self
    }

    /// The lock's name.
    pub fn name(&self) -> &[u8] {
        &self.inner.name
    }

    /// Tries once to read: `Ok(None)` when a writer holds or waits.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`RwLock::acquire_until`].
    pub async fn try_read(&self) -> Result<Option<RwGuard>> {
        self.try_once(RwAccess::Read).await
    }

    /// Tries once to write: `Ok(None)` when anyone holds it (or readers
    /// were let in before the next writer).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`RwLock::acquire_until`].
    pub async fn try_write(&self) -> Result<Option<RwGuard>> {
        self.try_once(RwAccess::Write).await
    }

    /// Waits at most `wait` to read ([`Error::WaitTimedOut`] after).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`RwLock::acquire_until`].
    pub async fn read_timeout(&self, wait: Duration) -> Result<RwGuard> {
        self.acquire_until(RwAccess::Read, Some(Instant::now() + wait))
            .await
    }

    /// Waits at most `wait` to write ([`Error::WaitTimedOut`] after).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`RwLock::acquire_until`].
    pub async fn write_timeout(&self, wait: Duration) -> Result<RwGuard> {
        self.acquire_until(RwAccess::Write, Some(Instant::now() + wait))
            .await
    }

    async fn try_once(&self, access: RwAccess) -> Result<Option<RwGuard>> {
        let trying = async {
            let mut pending = Pending::new(&self.inner, access)?;
            let attempt = self.attempt(&mut pending, false).await?;
            Ok(attempt.ok())
        };
        let spec = &self.inner;
        traced::acquire(
            &spec.metrics_label,
            &spec.name,
            trying,
            Outcome::of_try,
            |g| g.as_ref().map(RwGuard::token),
        )
        .await
    }

    /// Waits until we hold the lock as `access` or `deadline` passes
    /// ([`Error::WaitTimedOut`]); `None` waits as long as it takes. While
    /// it waits, its intent is recorded (see [`RwLock`], "The policy"): a waiting
    /// writer holds new readers back. Transient errors are retried until
    /// the deadline; when the last attempt failed so, that error is
    /// returned instead of [`Error::WaitTimedOut`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future withdraws its intent and releases a
    /// hold that a request whose reply was never read may have taken, in
    /// the background (tracked by the client: [`Client::flush`](crate::Client::flush)).
    pub async fn acquire_until(
        &self,
        access: RwAccess,
        deadline: Option<Instant>,
    ) -> Result<RwGuard> {
        let spec = &self.inner;
        let token: fn(&RwGuard) -> Option<&str> = |g| Some(g.token());
        // Its first attempt records the intent: the whole loop is the wait.
        let waiting = traced::wait(
            &spec.metrics_label,
            &spec.name,
            self.wait(access, deadline),
            token,
        );
        traced::acquire(
            &spec.metrics_label,
            &spec.name,
            waiting,
            Outcome::of_wait,
            token,
        )
        .await
    }

    /// The loop of [`RwLock::acquire_until`].
    async fn wait(&self, access: RwAccess, deadline: Option<Instant>) -> Result<RwGuard> {
        let started = Instant::now();
        let mut pending = Pending::new(&self.inner, access)?;
        let channel = self.inner.channel().to_vec();
        let mut waker = Waker::subscribe(&self.inner.session, channel, deadline).await;
        let mut retry = Retry::until(deadline);
        let what = String::from_utf8_lossy(&self.inner.name);
        loop {
            let wake_at = match self.attempt(&mut pending, true).await {
                Ok(Ok(guard)) => return Ok(guard),
                Ok(Err(retry_in)) => {
                    retry.answered(&what);
                    Instant::now() + retry_in + Duration::from_millis(1)
                }
                // The one failure policy: retried until the deadline, then
                // returned (an outage is not a conflict).
                Err(e) => Instant::now() + retry.failed(e, &what)?,
            };
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Error::WaitTimedOut {
                    name: String::from_utf8_lossy(&self.inner.name).into_owned(),
                    waited: started.elapsed(),
                });
            }
            let _ = waker.sleep(Some(wake_at), deadline).await;
        }
    }

    /// One attempt with `pending`'s token; `waiting`: record the intent
    /// when refused. The hold, or how soon to try again.
    async fn attempt(
        &self,
        pending: &mut Pending<'_>,
        waiting: bool,
    ) -> Result<std::result::Result<RwGuard, Duration>> {
        let spec = &self.inner;
        let sent = Instant::now();
        let ttl = ttl_ms(spec.ttl).to_string();
        let mode: &[u8] = match pending.access {
            RwAccess::Read => b"r",
            RwAccess::Write => b"w",
        };
        let issue: &[u8] = if spec.fenced { b"1" } else { b"0" };
        let keys: Vec<&[u8]> = spec.keys[..6].iter().map(Vec::as_slice).collect();
        pending.armed = true;
        let token = pending.token.clone();
        let reply: (i64, i64) = spec
            .session
            .eval(
                "rwlock acquire",
                &scripts::RW_ACQUIRE,
                &keys,
                &[
                    mode,
                    token.as_bytes(),
                    ttl.as_bytes(),
                    issue,
                    if waiting { b"1" } else { b"0" },
                ],
            )
            .await?;
        match reply {
            (1, fence) => {
                pending.armed = false;
                let fencing_token = (pending.access == RwAccess::Write && spec.fenced)
                    .then(|| u64::try_from(fence).unwrap_or_default());
                let valid_until = sent + spec.ttl - drift(spec.ttl);
                Ok(Ok(RwGuard::new(
                    spec.clone(),
                    pending.access,
                    std::mem::take(&mut pending.token),
                    fencing_token,
                    valid_until,
                )))
            }
            (0, wait_ms) => {
                // Refused: nothing to release; the intent (if any) stays
                // armed until we are done waiting.
                pending.armed = waiting;
                Ok(Err(Duration::from_millis(
                    u64::try_from(wait_ms).unwrap_or(1),
                )))
            }
            other => Err(Error::Protocol(format!(
                "rwlock acquire script returned {other:?}"
            ))),
        }
    }
}

/// A waiter's token while it may have left something in Redis: an intent,
/// or a hold taken by a request whose reply was never read. Dropped with
/// `armed`, it withdraws both in the background.
struct Pending<'a> {
    spec: &'a Arc<RwSpec>,
    access: RwAccess,
    /// Empty once moved into a guard.
    token: String,
    armed: bool,
}

impl<'a> Pending<'a> {
    fn new(spec: &'a Arc<RwSpec>, access: RwAccess) -> Result<Pending<'a>> {
        Ok(Pending {
            spec,
            access,
            token: spec.session.inner.identity.new_token()?,
            armed: false,
        })
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.armed || self.token.is_empty() {
            return;
        }
        let (spec, access) = (self.spec.clone(), self.access);
        let token = std::mem::take(&mut self.token);
        in_background(
            &self.spec.session,
            "a read-write lock wait ended or was cancelled; withdrawing its intent",
            async move {
                let k = &spec.keys;
                let _: i64 = spec
                    .session
                    .eval(
                        "rwlock forget",
                        &scripts::RW_FORGET,
                        &[&k[2], &k[3], &k[4]],
                        &[token.as_bytes()],
                    )
                    .await?;
                crate::primitives::rwlock::guard::release(&spec, access, &token)
                    .await
                    .map(|_| ())
            },
        );
    }
}
