//! [`RwLock`]: many readers or one writer, across processes; each hold a
//! lease, and neither side starved.
//!
//! User docs (example, the policy) are on the type.
//!
//! The layout and scripts are in `docs/protocol.md`, "Read-write locks".

mod by_token;
pub(crate) mod guard;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::primitives::lease::options::LeaseOptions;
use crate::primitives::rwlock::guard::{RwAccess, RwGuard, RwSpec};
use crate::primitives::shared::{key, publish_command, publish_request};
use crate::primitives::traced;
use crate::primitives::wait::armed::{undo_in_background, Armed};
use crate::primitives::wait::ask::Ask;
use crate::primitives::wait::{deadline_after, wait_for, Tried, Waiting};
use crate::vocab::error::{Error, Result};
use crate::vocab::kind::Kind;
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::{check_primitive, ttl_ms};
use crate::vocab::protocol::scripts;
use crate::vocab::protocol::{RWLOCK_SUFFIXES, RWLOCK_WRITER_ACQUIRED_SUFFIX};

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
/// let reading = catalog.read_until(Duration::from_secs(5)).await?;
/// // ... read the catalog ...
/// reading.release().await?;
///
/// // One writer, alone:
/// let writing = catalog.write_until(Duration::from_secs(30)).await?;
/// println!("writing with fencing token {}", writing.fencing_token().await?);
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
    pub(crate) inner: Arc<RwSpec>,
}

impl RwLock {
    /// See [`Client::rwlock`](crate::Client::rwlock).
    pub(crate) fn on_session(
        session: &crate::transport::session::Session,
        name: &[u8],
        ttl: Duration,
    ) -> Result<RwLock> {
        check_primitive(session.prefix(), session.is_cluster(), name, ttl)?;
        let keys = RWLOCK_SUFFIXES.map(|suffix| key(session, name, suffix));
        Ok(RwLock {
            inner: Arc::new(RwSpec {
                session: session.clone(),
                name: Arc::from(name),
                keys: Arc::new(keys),
                lease: LeaseOptions::new(ttl),
                metrics_label: LockLabel::new(&session.inner.metrics_labels, Kind::RwLock, name),
            }),
        })
    }

    crate::primitives::builder::lease_options!("read-write lock", "hold", "every writer's hold");

    /// The Redis key of the writer's hold (a string holding its token).
    pub fn writer_key(&self) -> &[u8] {
        self.inner.writer()
    }

    /// The Redis key of the readers' holds (a sorted set of their tokens).
    pub fn readers_key(&self) -> &[u8] {
        self.inner.readers()
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

    /// Waits as long as it takes to read.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`RwLock::acquire_until`].
    pub async fn read(&self) -> Result<RwGuard> {
        self.acquire_by(RwAccess::Read, None).await
    }

    /// Waits as long as it takes to write.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`RwLock::acquire_until`].
    pub async fn write(&self) -> Result<RwGuard> {
        self.acquire_by(RwAccess::Write, None).await
    }

    /// Waits at most `wait` to read ([`Error::WaitTimedOut`] after).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`RwLock::acquire_until`].
    #[deprecated(
        since = "0.4.0",
        note = "use `read_until`, which takes a Duration (from now) as well as an Instant"
    )]
    pub async fn read_timeout(&self, wait: Duration) -> Result<RwGuard> {
        self.acquire_by(RwAccess::Read, deadline_after(wait)).await
    }

    /// Waits at most `wait` to write ([`Error::WaitTimedOut`] after).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`RwLock::acquire_until`].
    #[deprecated(
        since = "0.4.0",
        note = "use `write_until`, which takes a Duration (from now) as well as an Instant"
    )]
    pub async fn write_timeout(&self, wait: Duration) -> Result<RwGuard> {
        self.acquire_by(RwAccess::Write, deadline_after(wait)).await
    }

    /// Waits until `deadline` to read ([`Error::WaitTimedOut`] after).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`RwLock::acquire_until`].
    pub async fn read_until(
        &self,
        deadline: impl Into<crate::vocab::deadline::Deadline>,
    ) -> Result<RwGuard> {
        self.acquire_by(RwAccess::Read, deadline.into().instant())
            .await
    }

    /// Waits until `deadline` to write ([`Error::WaitTimedOut`] after).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`RwLock::acquire_until`].
    pub async fn write_until(
        &self,
        deadline: impl Into<crate::vocab::deadline::Deadline>,
    ) -> Result<RwGuard> {
        self.acquire_by(RwAccess::Write, deadline.into().instant())
            .await
    }

    async fn try_once(&self, access: RwAccess) -> Result<Option<RwGuard>> {
        let trying = async {
            let token = self.inner.session.inner.identity.new_token()?;
            let pending = self.pending(access, &token);
            Ok(self.attempt(access, &token, &pending, false).await?.ok())
        };
        let spec = &self.inner;
        traced::first_try(&spec.metrics_label, &spec.name, trying).await
    }

    /// Waits until we hold the lock as `access` or `deadline` passes
    /// ([`Error::WaitTimedOut`]). While
    /// it waits, its intent is recorded (see [`RwLock`], "The policy"): a waiting
    /// writer holds new readers back. Transient errors are retried until
    /// the deadline; when the last attempt failed so, that error is
    /// returned instead of [`Error::WaitTimedOut`]; without a deadline
    /// ([`read`](RwLock::read), [`write`](RwLock::write)) an error that
    /// persists for 30 s is returned.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future withdraws its intent and releases a
    /// hold that a request whose reply was never read may have taken, in
    /// the background (tracked by the client: [`Client::flush`](crate::Client::flush)).
    pub async fn acquire_until(
        &self,
        access: RwAccess,
        deadline: impl Into<crate::vocab::deadline::Deadline>,
    ) -> Result<RwGuard> {
        self.acquire_by(access, deadline.into().instant()).await
    }

    /// [`RwLock::acquire_until`] with an optional deadline (`None`: as long
    /// as it takes).
    pub(crate) async fn acquire_by(
        &self,
        access: RwAccess,
        deadline: Option<Instant>,
    ) -> Result<RwGuard> {
        let spec = &self.inner;
        // Its first attempt records the intent: the whole loop is the wait.
        let waiting = crate::primitives::wait::bounded(deadline, self.wait(access, deadline));
        traced::waiting(&spec.metrics_label, &spec.name, waiting).await
    }

    /// The loop of [`RwLock::acquire_until`]: the wait core, woken by
    /// releases and at the earliest expiry that could let us in; made
    /// `with_asking`, it asks the holders to let go (`wait/ask.rs`).
    async fn wait(&self, access: RwAccess, deadline: Option<Instant>) -> Result<RwGuard> {
        let spec = &self.inner;
        let token = spec.session.inner.identity.new_token()?;
        let pending = self.pending(access, &token);
        let ask = Ask::new(spec.lease.asking);
        let mut waiting =
            Waiting::subscribe(&spec.session, spec.channel(), &spec.name, deadline).await;
        wait_for(&mut waiting, |woken| {
            let (ask, token, pending) = (&ask, &token, &pending);
            async move {
                Ok(match self.attempt(access, token, pending, true).await? {
                    Ok(guard) => Tried::Done(guard),
                    Err(retry_in) => {
                        ask.ask_if_due(&spec.name, &woken, None, || {
                            publish_request(&spec.session, spec.channel())
                        })
                        .await;
                        Tried::busy_for(Some(retry_in))
                    }
                })
            }
        })
        .await
    }

    /// The guard of a waiter's `token` while it may have left something in
    /// Redis (an intent, or a hold taken by a request whose reply was
    /// never read): dropped armed, it withdraws both in the background.
    fn pending<'a>(&'a self, access: RwAccess, token: &'a str) -> Armed<impl FnOnce() + 'a> {
        let spec = &self.inner;
        let armed = undo_in_background(
            &spec.session,
            "a read-write lock wait ended or was cancelled; withdrawing its intent",
            move || {
                let (spec, token) = (spec.clone(), token.to_owned());
                async move {
                    let k = &spec.keys;
                    let _: i64 = spec
                        .session
                        .eval(
                            "rwlock forget",
                            &scripts::RW_FORGET,
                            &[&k[2], &k[3], &k[4]],
                            // Publishing wakes those the intent held back.
                            &[
                                token.as_bytes(),
                                publish_command(&spec.session),
                                spec.channel(),
                            ],
                        )
                        .await?;
                    crate::primitives::rwlock::guard::release(&spec, access, &token)
                        .await
                        .map(|_| ())
                }
            },
        );
        // Armed by each attempt, before its request is sent.
        armed.disarm();
        armed
    }

    /// One attempt as `access` with `token`; `waiting`: record the intent
    /// when refused (and leave `pending` armed to withdraw it). The hold,
    /// or how soon to try again.
    async fn attempt(
        &self,
        access: RwAccess,
        token: &str,
        pending: &Armed<impl FnOnce()>,
        waiting: bool,
    ) -> Result<std::result::Result<RwGuard, Duration>> {
        let spec = &self.inner;
        let sent = Instant::now();
        let ttl = ttl_ms(spec.lease.ttl).to_string();
        let mode: &[u8] = match access {
            RwAccess::Read => b"r",
            RwAccess::Write => b"w",
        };
        let issue: &[u8] = if spec.lease.fenced { b"1" } else { b"0" };
        let mut keys: Vec<&[u8]> = spec.keys[..6].iter().map(Vec::as_slice).collect();
        // A writer that waited records when it got the lock (inspection's age).
        let acquired = match access {
            RwAccess::Write => key(&spec.session, &spec.name, RWLOCK_WRITER_ACQUIRED_SUFFIX),
            RwAccess::Read => Vec::new(),
        };
        if access == RwAccess::Write {
            keys.push(&acquired);
        }
        pending.arm();
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
                pending.disarm();
                let fencing_token = (access == RwAccess::Write && spec.lease.fenced)
                    .then(|| u64::try_from(fence).unwrap_or_default());
                let valid_until = crate::vocab::names::valid_until(sent, spec.lease.ttl);
                Ok(Ok(RwGuard::new(
                    spec.clone(),
                    access,
                    token.to_owned(),
                    fencing_token,
                    valid_until,
                )))
            }
            (0, wait_ms) => {
                // Refused: nothing to release; the intent (if any) stays
                // armed until we are done waiting.
                if !waiting {
                    pending.disarm();
                }
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

crate::primitives::builder::hold_options_impl!(RwLock);
