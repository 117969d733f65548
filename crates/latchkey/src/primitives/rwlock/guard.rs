//! [`RwGuard`]: one hold of a [`RwLock`](crate::RwLock), as a reader or
//! the writer; a lease like a lock's (same deadline, watchdog and lost
//! signal, `primitives/watchdog.rs`), renewed and lost on its own: each reader's hold
//! is its own lease.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::primitives::shared::{in_background, publish_command};
use crate::primitives::traced::release_span;
use crate::primitives::watchdog::{renew_span, renew_until_done, LostSignal, State};
use crate::transport::session::Session;
use crate::vocab::error::Result;
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::{drift, ttl_ms};
use crate::vocab::outcome::Ownership;
use crate::vocab::protocol::scripts;
use crate::vocab::token::short;

/// How a read-write lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwAccess {
    /// One of many readers.
    Read,
    /// The one writer.
    Write,
}

/// What every hold of a read-write lock shares (its recipe, made by
/// [`RwLock`](crate::RwLock); here so that the guard needs nothing above it).
#[derive(Clone)]
pub(crate) struct RwSpec {
    pub(crate) session: Session,
    pub(crate) name: Arc<[u8]>,
    /// In the order of [`crate::vocab::protocol::RWLOCK_SUFFIXES`].
    pub(crate) keys: Arc<[Vec<u8>; 7]>,
    pub(crate) ttl: Duration,
    pub(crate) renew_every: Option<Duration>,
    pub(crate) fenced: bool,
    pub(crate) metrics_label: LockLabel,
}

impl RwSpec {
    pub(crate) fn writer(&self) -> &[u8] {
        &self.keys[0]
    }
    pub(crate) fn readers(&self) -> &[u8] {
        &self.keys[1]
    }
    pub(crate) fn channel(&self) -> &[u8] {
        &self.keys[6]
    }
}

/// A held read-write lock: a reader's hold or the writer's.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// use latchkey::RwAccess;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let catalog = client.rwlock("catalog", Duration::from_secs(10))?.with_watchdog();
/// let hold = catalog.read_timeout(Duration::from_secs(5)).await?;
/// assert_eq!(hold.access(), RwAccess::Read);
/// tokio::select! {
///     _ = hold.lost() => eprintln!("read hold lost: the catalog may change under us"),
///     _ = async { /* read the catalog */ } => {}
/// }
/// hold.release().await?;
/// # Ok(()) }
/// ```
///
/// # What it promises
/// While [`is_held`](RwGuard::is_held) is true, a reader's hold means no
/// writer holds the lock, and the writer's hold means nobody else holds it
/// at all. Each hold is its own lease: renewed, lost and released on its own.
/// The policy (phase-fair, neither side starved) is on
/// [`RwLock`](crate::RwLock).
///
/// # Dropping
/// Release it with [`release`](RwGuard::release); a guard dropped without
/// it is released in the background (tracked by the client, see
/// [`Client::flush`](crate::Client::flush)); without a runtime or Redis,
/// the hold ends at its TTL.
#[must_use = "the hold is released (in the background) when the guard is dropped"]
pub struct RwGuard {
    spec: Arc<RwSpec>,
    access: RwAccess,
    token: String,
    fencing_token: Option<u64>,
    state: Arc<State>,
    released: bool,
    /// When the hold began; taken out when the hold is timed.
    acquired_at: Option<Instant>,
}

impl std::fmt::Debug for RwGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwGuard")
            .field("name", &String::from_utf8_lossy(&self.spec.name))
            .field("access", &self.access)
            .field("token", &short(&self.token))
            .field("fencing_token", &self.fencing_token)
            .field("held", &self.is_held())
            .finish()
    }
}

impl RwGuard {
    pub(crate) fn new(
        spec: Arc<RwSpec>,
        access: RwAccess,
        token: String,
        fencing_token: Option<u64>,
        valid_until: Instant,
    ) -> RwGuard {
        let state = Arc::new(State::new(valid_until, spec.metrics_label.clone()));
        if let Some(every) = spec.renew_every {
            state
                .timer_running
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let (spec, token, state) = (spec.clone(), token.clone(), state.clone());
            tokio::spawn(async move {
                let name = String::from_utf8_lossy(&spec.name).into_owned();
                let kind = spec.metrics_label.kind();
                renew_until_done(&name, &token, every, &state, || {
                    let span = renew_span(kind, &spec.name, &token);
                    extend(&spec, access, &token).instrument(span)
                })
                .await
            });
        }
        RwGuard {
            spec,
            access,
            token,
            fencing_token,
            state,
            released: false,
            acquired_at: Some(Instant::now()),
        }
    }

    /// Records the hold's time, once (at `release`, or at the drop).
    fn hold_ended(&mut self) {
        if let Some(at) = self.acquired_at.take() {
            crate::vocab::metrics::hold_time(&self.spec.metrics_label, at.elapsed());
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &[u8] {
        &self.spec.name
    }

    /// Whether this is a reader's hold or the writer's.
    pub fn access(&self) -> RwAccess {
        self.access
    }

    /// Our owner token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The writer's fencing token, issued with the hold when the lock was
    /// made [`with_fencing`](crate::RwLock::with_fencing): greater than that
    /// of every earlier writer. `None` for readers (they do not write).
    pub fn fencing_token(&self) -> Option<u64> {
        self.fencing_token
    }

    /// Until when we may assume we hold it (monotonic clock).
    pub fn deadline(&self) -> Instant {
        self.state.deadline()
    }

    /// True while the hold is not known to be lost and the deadline has not
    /// passed. Asks nobody.
    pub fn is_held(&self) -> bool {
        !self.state.is_lost() && Instant::now() < self.state.deadline()
    }

    /// Completes when the hold can no longer be proven: at once when a
    /// renewal finds it gone, otherwise at the deadline.
    ///
    /// # Cancel safety
    /// Cancel safe; it can be polled again, or from several places.
    pub async fn lost(&self) {
        self.state.until_lost().await
    }

    /// A handle on the [`lost`](RwGuard::lost) signal that outlives the
    /// borrow of the guard. Needs a tokio runtime.
    pub fn lost_signal(&self) -> LostSignal {
        self.state.lost_signal()
    }

    /// Releases the hold and wakes the waiters; stops the watchdog. One
    /// round trip. A writer's release lets in the readers waiting at that
    /// moment before the next writer.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before the reply was read, the
    /// guard's `Drop` releases in the background (the scripts are owner-only
    /// and idempotent).
    pub async fn release(mut self) -> Result<Ownership> {
        self.state.finish();
        self.hold_ended();
        let span = release_span(&self.spec.metrics_label, &self.spec.name, &self.token);
        let outcome = release(&self.spec, self.access, &self.token)
            .instrument(span)
            .await;
        // A transient error: `Drop` tries again (and counts what it finds).
        if !matches!(&outcome, Err(e) if e.is_transient()) {
            self.released = true;
            let found = outcome.as_ref().ok().copied();
            crate::vocab::metrics::release_outcome(&self.spec.metrics_label, found);
        }
        outcome
    }
}

impl Drop for RwGuard {
    fn drop(&mut self) {
        self.state.finish();
        if self.released {
            return;
        }
        self.hold_ended();
        let (spec, access) = (self.spec.clone(), self.access);
        let token = std::mem::take(&mut self.token);
        let span = release_span(&spec.metrics_label, &spec.name, &token);
        let until = self.state.deadline();
        in_background(
            &self.spec.session,
            "read-write lock guard dropped without release(), or its release failed",
            async move {
                let what = "read-write lock release";
                let outcome = crate::vocab::retry::until_deadline(until, &what, || {
                    release(&spec, access, &token)
                })
                .await;
                let found = outcome.as_ref().ok().copied();
                crate::vocab::metrics::release_outcome(&spec.metrics_label, found);
                outcome.map(|_| ())
            }
            .instrument(span),
        );
    }
}

/// Owner-only release of a hold, waking the waiters.
pub(crate) async fn release(spec: &RwSpec, access: RwAccess, token: &str) -> Result<Ownership> {
    let publish = publish_command(&spec.session);
    let reply: i64 = match access {
        RwAccess::Read => {
            spec.session
                .eval(
                    "rwlock release",
                    &scripts::SEM_RELEASE,
                    &[spec.readers()],
                    &[token.as_bytes(), publish, spec.channel()],
                )
                .await?
        }
        RwAccess::Write => {
            let ttl = ttl_ms(spec.ttl).to_string();
            let k = &spec.keys;
            spec.session
                .eval(
                    "rwlock release",
                    &scripts::RW_RELEASE_WRITE,
                    &[&k[0], &k[3], &k[4]],
                    &[token.as_bytes(), ttl.as_bytes(), publish, spec.channel()],
                )
                .await?
        }
    };
    Ok(match reply {
        1 => Ownership::Owned,
        -1 => Ownership::HeldByOther,
        _ => Ownership::Expired,
    })
}

/// Renews a hold: a reader's member (`sem_extend.lua`), or the writer's key
/// (the lock's `extend.lua`).
async fn extend(spec: &RwSpec, access: RwAccess, token: &str) -> Result<(Ownership, Instant)> {
    let sent = Instant::now();
    let ttl = ttl_ms(spec.ttl).to_string();
    let (script, key) = match access {
        RwAccess::Read => (&*scripts::SEM_EXTEND, spec.readers()),
        RwAccess::Write => (&*scripts::EXTEND, spec.writer()),
    };
    let reply: i64 = spec
        .session
        .eval(
            "rwlock extend",
            script,
            &[key],
            &[token.as_bytes(), ttl.as_bytes()],
        )
        .await?;
    let outcome = match reply {
        1 => Ownership::Owned,
        -1 => Ownership::HeldByOther,
        _ => Ownership::Expired,
    };
    Ok((outcome, sent + spec.ttl - drift(spec.ttl)))
}
