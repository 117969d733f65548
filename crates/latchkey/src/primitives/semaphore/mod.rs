//! [`Semaphore`]: at most N holders at once, across processes and machines,
//! where every permit is a lease.
//!
//! User docs (example, promises) are on the type; this module keeps the
//! mechanics.
//!
//! The layout (a sorted set of holder tokens scored by expiry in server
//! time, a fencing counter, a channel, one hash tag) and the scripts are in
//! `docs/protocol.md`, "Semaphores".

mod by_token;
mod many;
pub(crate) mod permit;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::primitives::inspect::Holding;
use crate::primitives::lease::options::LeaseOptions;
use crate::primitives::semaphore::permit::{PermitGuard, PermitHold, SemaphoreSpec};
use crate::primitives::shared::{key, publish_request};
use crate::primitives::traced;
use crate::primitives::wait::armed::undo_in_background;
use crate::primitives::wait::ask::Ask;
use crate::primitives::wait::{deadline_after, wait_for, Tried, Waiting};
use crate::transport::session::Session;
use crate::vocab::error::{Error, Result};
use crate::vocab::kind::Kind;
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::{check_count, check_primitive, ttl_ms};
use crate::vocab::protocol::scripts;
use crate::vocab::protocol::{PERMITS_FENCE_SUFFIX, PERMITS_RELEASED_SUFFIX, PERMITS_SUFFIX};

/// A counting semaphore: at most N holders at once, across processes and
/// machines, where every permit is a lease. A recipe called by name, cheap
/// to clone; made by [`Client::semaphore`](crate::Client::semaphore).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// // At most 4 exports run at once, whoever runs them.
/// let exports = client
///     .semaphore("exports", 4, Duration::from_secs(30))?
///     .with_watchdog()
///     .with_fencing();
///
/// let permit = exports.acquire_until(Duration::from_secs(60)).await?;
/// println!("permit held; fencing token {}", permit.fencing_token().await?);
/// tokio::select! {
///     _ = permit.lost() => eprintln!("permit lost: stop exporting"),
///     _ = async { /* the export */ } => {}
/// }
/// permit.release().await?;
/// # Ok(()) }
/// ```
///
/// # What it promises
/// * **At most N permits are held at once** (by the holders' deadlines: a
///   holder counts its permit held until `sent + ttl - drift`, as a lock's
///   holder does, and the server frees it only at `ttl`).
/// * **Every permit is a lease**: a holder that dies gives its permit back
///   within its TTL (the next acquire prunes it); the
///   [watchdog](Semaphore::with_watchdog) renews a held permit every
///   `ttl / 3`, and [`PermitGuard::lost`] fires when it can no longer prove
///   the permit is held, before it could have expired.
/// * **Waiting is woken**, not polled: a release publishes on the
///   semaphore's channel and every waiter tries again; a waiter also wakes
///   when the earliest permit expires (a dead holder's). **Not FIFO**: the
///   waiters woken race for the free permit, and any of them (or a newcomer)
///   may win. Under steady contention a waiter can be overtaken; bound its
///   wait with [`acquire_until`](Semaphore::acquire_until).
/// * **Several permits at once, all or none**:
///   [`acquire_many(k)`](Semaphore::acquire_many) takes k permits in one
///   script or none (never a part of them), held, renewed, fenced and
///   released as one hold. A waiter for k is woken by every release and
///   tries again (and, as any waiter, at the expiry that would make room),
///   but it is **not protected from barging**: while smaller acquisitions
///   keep taking each permit as it is freed, k may never be free at once.
///   It gets them when the semaphore drains (k permits free together); bound
///   its wait with [`acquire_many_until`](Semaphore::acquire_many_until),
///   or give the semaphore's users a pause, if they never let it drain.
/// * **Fencing**: with [`with_fencing`](Semaphore::with_fencing), each hold
///   gets a token greater than those of all earlier holds of the semaphore
///   (one counter per semaphore, as for a lock).
/// * **N is passed by every caller**, not stored (as in the npm
///   `redis-semaphore`): an acquire takes a permit when fewer than *its* N
///   are held. An operator changes N by restarting the callers with the
///   new N, and no holder loses its permit: after lowering N, holders keep
///   theirs and new acquires wait until fewer than the new N are held;
///   while old and new callers mix, at most the larger N are held.
#[derive(Clone)]
pub struct Semaphore {
    pub(crate) inner: Arc<SemaphoreSpec>,
}

impl Semaphore {
    /// See [`Client::semaphore`](crate::Client::semaphore).
    pub(crate) fn on_session(
        session: &Session,
        name: &[u8],
        permits: u64,
        ttl: Duration,
    ) -> Result<Semaphore> {
        check_primitive(session.prefix(), session.is_cluster(), name, ttl)?;
        let permits = check_count("semaphore permits", permits)?;
        Ok(Semaphore {
            inner: Arc::new(SemaphoreSpec {
                session: session.clone(),
                name: Arc::from(name),
                key: key(session, name, PERMITS_SUFFIX).into(),
                fence_key: key(session, name, PERMITS_FENCE_SUFFIX).into(),
                channel: key(session, name, PERMITS_RELEASED_SUFFIX).into(),
                permits,
                lease: LeaseOptions::new(ttl),
                metrics_label: LockLabel::new(&session.inner.metrics_labels, Kind::Semaphore, name),
            }),
        })
    }

    crate::primitives::builder::lease_options!(
        "semaphore",
        "permit",
        "every permit (see [`PermitGuard::fencing_token`])"
    );

    /// N, the permits this caller allows at once.
    pub fn permits(&self) -> u32 {
        self.inner.permits
    }

    /// The Redis key of the permits (a sorted set).
    pub fn key(&self) -> &[u8] {
        &self.inner.key
    }

    /// Tries once: `Ok(Some(permit))` if fewer than N permits were held,
    /// `Ok(None)` otherwise. One round trip.
    ///
    /// Fails with [`Error::WrongType`] when the key holds something other
    /// than a semaphore, and (with fencing) [`Error::BadFencingCounter`].
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped after the request was sent, a
    /// permit the request may have taken is given back in the background
    /// (tracked by the client: [`Client::flush`](crate::Client::flush)).
    pub async fn try_acquire(&self) -> Result<Option<PermitGuard>> {
        self.try_take(1).await
    }

    /// One try for `k` permits, traced.
    async fn try_take(&self, k: u32) -> Result<Option<PermitGuard>> {
        let attempt = async { Ok(self.attempt(k).await?.ok()) };
        let spec = &self.inner;
        traced::first_try(&spec.metrics_label, &spec.name, attempt).await
    }

    /// Waits as long as it takes. See [`Semaphore::acquire_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Semaphore::acquire_until`].
    pub async fn acquire(&self) -> Result<PermitGuard> {
        self.acquire_by(1, None).await
    }

    /// Waits at most `wait`, then fails with [`Error::WaitTimedOut`]. See
    /// [`Semaphore::acquire_until`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Semaphore::acquire_until`].
    #[deprecated(
        since = "0.4.0",
        note = "use `acquire_until`, which takes a Duration (from now) as well as an Instant"
    )]
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<PermitGuard> {
        self.acquire_by(1, deadline_after(wait)).await
    }

    /// Waits until a permit is ours or `deadline` passes
    /// ([`Error::WaitTimedOut`]). A waiter
    /// subscribes to the semaphore's channel, then tries, then sleeps until
    /// a release message or the earliest permit's expiry, and tries again.
    /// Transient errors are retried until the deadline; when the last
    /// attempt failed so, that error is returned instead of
    /// [`Error::WaitTimedOut`] (an outage is not a full semaphore); without
    /// a deadline an error that persists for 30 s is returned.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves no permit behind (one taken
    /// by a request whose reply was never read is given back in the
    /// background) and gives up the subscription.
    pub async fn acquire_until(
        &self,
        deadline: impl Into<crate::vocab::deadline::Deadline>,
    ) -> Result<PermitGuard> {
        self.acquire_by(1, deadline.into().instant()).await
    }

    /// [`Semaphore::acquire_many_until`] of `k` (checked) with an optional
    /// deadline (`None`: as long as it takes).
    pub(crate) async fn acquire_by(
        &self,
        k: u32,
        deadline: Option<Instant>,
    ) -> Result<PermitGuard> {
        let spec = &self.inner;
        let acquiring =
            traced::first_try_then_wait(&spec.metrics_label, &spec.name, self.attempt(k), || {
                self.wait_for_permit(k, deadline)
            });
        crate::primitives::wait::bounded(deadline, acquiring).await
    }

    /// The waiting part of [`Semaphore::acquire_many_until`] (the first
    /// attempt found too few permits free): the wait core, woken by releases
    /// and at the expiry that would make room; made `with_asking`, it asks
    /// the holders to let go (`wait/ask.rs`).
    async fn wait_for_permit(&self, k: u32, deadline: Option<Instant>) -> Result<PermitGuard> {
        let spec = &self.inner;
        let ask = Ask::new(spec.lease.asking);
        let mut waiting =
            Waiting::subscribe(&spec.session, &spec.channel, &spec.name, deadline).await;
        wait_for(&mut waiting, |woken| {
            let ask = &ask;
            async move {
                Ok(match self.attempt(k).await? {
                    Ok(permit) => Tried::Done(permit),
                    Err(room_in) => {
                        ask.ask_if_due(&spec.name, &woken, None, || {
                            publish_request(&spec.session, &spec.channel)
                        })
                        .await;
                        Tried::busy_for(Some(room_in))
                    }
                })
            }
        })
        .await
    }

    /// One attempt for `k` permits: the hold, or how long until enough held
    /// permits expire for `k` to fit.
    async fn attempt(&self, k: u32) -> Result<std::result::Result<PermitGuard, Duration>> {
        let spec = &self.inner;
        let token = spec.session.inner.identity.new_token()?;
        let sent = Instant::now();
        let pending = undo_in_background(
            &spec.session,
            "a semaphore acquire was cancelled or failed after its request was sent",
            || {
                let (spec, token) = (spec.clone(), token.clone());
                async move {
                    crate::primitives::semaphore::permit::release(&spec, &token, k)
                        .await
                        .map(|_| ())
                }
            },
        );
        let permits = spec.permits.to_string();
        let ttl = ttl_ms(spec.lease.ttl).to_string();
        let take = k.to_string();
        let reply: Result<(i64, i64)> = spec
            .session
            .eval(
                "semaphore acquire",
                &scripts::SEM_ACQUIRE,
                &[&spec.key, &spec.fence_key],
                &[
                    token.as_bytes(),
                    permits.as_bytes(),
                    ttl.as_bytes(),
                    if spec.lease.fenced { b"1" } else { b"0" },
                    take.as_bytes(),
                ],
            )
            .await;
        // Only a request that may have run can have taken a permit.
        if !reply.as_ref().is_err_and(Error::is_transient) {
            pending.disarm();
        }
        drop(pending);
        let (acquired, value) = reply?;
        match acquired {
            1 => {
                let fencing_token =
                    match spec.lease.fenced {
                        true => Some(u64::try_from(value).map_err(|_| {
                            Error::Protocol(format!("negative fencing token {value}"))
                        })?),
                        false => None,
                    };
                let valid_until = crate::vocab::names::valid_until(sent, spec.lease.ttl);
                let hold = PermitHold {
                    spec: self.inner.clone(),
                    taken: k,
                };
                Ok(Ok(PermitGuard::new(
                    hold,
                    token,
                    fencing_token,
                    valid_until,
                )))
            }
            0 => Ok(Err(Duration::from_millis(
                u64::try_from(value).unwrap_or(1),
            ))),
            other => Err(Error::Protocol(format!(
                "semaphore acquire script returned {other}"
            ))),
        }
    }

    /// The permits held now, soonest to expire first, with their holders
    /// (the [`SemaphoreInfo::permits`](crate::inspect::SemaphoreInfo) of
    /// [`Client::describe`](crate::Client::describe)).
    /// Two round trips (`TIME`, `ZRANGE`); expired permits not yet pruned
    /// are left out.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn holders(&self) -> Result<Vec<Holding>> {
        crate::primitives::semaphore::permit::holders(&self.inner.session, &self.inner.key).await
    }
}

crate::primitives::builder::hold_options_impl!(Semaphore);
