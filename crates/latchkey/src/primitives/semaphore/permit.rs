//! [`PermitGuard`]: one held permit of a [`Semaphore`](crate::Semaphore),
//! a lease like a lock's: the same deadline, watchdog and lost signal
//! (`primitives/watchdog.rs`), over the semaphore's own scripts.

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
use crate::vocab::token::{short, Holder};

/// What every permit of a semaphore shares (its recipe: made by
/// [`Semaphore`](crate::Semaphore), here so that the guard needs nothing above it).
#[derive(Clone)]
pub(crate) struct SemaphoreSpec {
    pub(crate) session: Session,
    pub(crate) name: Arc<[u8]>,
    pub(crate) key: Arc<[u8]>,
    pub(crate) fence_key: Arc<[u8]>,
    pub(crate) channel: Arc<[u8]>,
    pub(crate) permits: u32,
    pub(crate) ttl: Duration,
    pub(crate) renew_every: Option<Duration>,
    pub(crate) fenced: bool,
    pub(crate) metrics_label: LockLabel,
}

/// A held permit of a [`Semaphore`](crate::Semaphore).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let uploads = client.semaphore("uploads", 8, Duration::from_secs(20))?;
/// if let Some(permit) = uploads.try_acquire().await? {
///     println!("permit until {:?}", permit.deadline());
///     // ... one of at most 8 uploads ...
///     permit.extend().await?; // renew it for the semaphore's TTL
///     permit.release().await?;
/// }
/// # Ok(()) }
/// ```
///
/// # What it promises
/// While [`is_held`](PermitGuard::is_held) is true, this permit counts
/// towards the semaphore's N and nobody can take it; `release` and `extend`
/// act only on our own permit and say what they found. The promises of the
/// semaphore as a whole are on [`Semaphore`](crate::Semaphore).
///
/// Like a [`LockGuard`](crate::LockGuard), it knows until when it may
/// assume it holds the permit ([`deadline`](PermitGuard::deadline)), and
/// [`lost`](PermitGuard::lost) fires when it no longer can.
///
/// # Dropping
/// Give the permit back with [`release`](PermitGuard::release). A guard
/// dropped without it gives the permit back in the background (tracked by
/// the client, see [`Client::flush`](crate::Client::flush)); without a
/// runtime, or without Redis, the permit frees itself at its TTL.
#[must_use = "the permit is given back (in the background) when the guard is dropped"]
pub struct PermitGuard {
    spec: Arc<SemaphoreSpec>,
    token: String,
    fencing_token: Option<u64>,
    state: Arc<State>,
    /// Set once `release` got an answer: `Drop` has nothing left to do.
    released: bool,
    /// When the permit was taken; taken out when the hold is timed.
    acquired_at: Option<Instant>,
}

impl std::fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermitGuard")
            .field("semaphore", &String::from_utf8_lossy(&self.spec.name))
            .field("token", &short(&self.token))
            .field("fencing_token", &self.fencing_token)
            .field("held", &self.is_held())
            .finish()
    }
}

impl PermitGuard {
    pub(crate) fn new(
        spec: Arc<SemaphoreSpec>,
        token: String,
        fencing_token: Option<u64>,
        valid_until: Instant,
    ) -> PermitGuard {
        let state = Arc::new(State::new(valid_until, spec.metrics_label.clone()));
        if let Some(every) = spec.renew_every {
            state
                .timer_running
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let (spec, token, state) = (spec.clone(), token.clone(), state.clone());
            tokio::spawn(async move {
                let name = String::from_utf8_lossy(&spec.key).into_owned();
                let kind = spec.metrics_label.kind();
                renew_until_done(&name, &token, every, &state, || {
                    extend(&spec, &token).instrument(renew_span(kind, &spec.name, &token))
                })
                .await
            });
        }
        tracing::debug!(semaphore = %String::from_utf8_lossy(&spec.name), token = short(&token), ?fencing_token, "permit acquired");
        PermitGuard {
            spec,
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

    /// The semaphore's name.
    pub fn name(&self) -> &[u8] {
        &self.spec.name
    }

    /// Our owner token: this permit's member in the semaphore's sorted set.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The fencing token of this hold, issued with it when the semaphore
    /// was made [`with_fencing`](crate::Semaphore::with_fencing) (else
    /// `None`): greater than the token of every earlier hold of any permit
    /// of this semaphore.
    pub fn fencing_token(&self) -> Option<u64> {
        self.fencing_token
    }

    /// Until when we may assume we hold the permit (monotonic clock).
    pub fn deadline(&self) -> Instant {
        self.state.deadline()
    }

    /// True while the permit is not known to be lost and the deadline has
    /// not passed. Asks nobody.
    pub fn is_held(&self) -> bool {
        !self.state.is_lost() && Instant::now() < self.state.deadline()
    }

    /// Completes when the permit can no longer be proven held: at once when
    /// a renewal finds it gone, otherwise at the deadline (which the
    /// watchdog keeps pushing out). Stop using the resource then.
    ///
    /// # Cancel safety
    /// Cancel safe; it can be polled again, or from several places.
    pub async fn lost(&self) {
        self.state.until_lost().await
    }

    /// A handle on the [`lost`](PermitGuard::lost) signal that outlives the
    /// borrow of the guard. Needs a tokio runtime.
    pub fn lost_signal(&self) -> LostSignal {
        self.state.lost_signal()
    }

    /// Renews the permit's TTL from now, if it is still held; otherwise
    /// marks the guard lost. One round trip.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped renewal may or may not have happened; the
    /// guard's deadline is only moved by an answer.
    pub async fn extend(&self) -> Result<Ownership> {
        let label = &self.spec.metrics_label;
        let span = renew_span(label.kind(), &self.spec.name, &self.token);
        let renewed = extend(&self.spec, &self.token).instrument(span).await;
        let owned = matches!(renewed, Ok((Ownership::Owned, _)));
        crate::vocab::metrics::renewal(label, owned);
        let (outcome, valid_until) = renewed?;
        match outcome {
            Ownership::Owned => self.state.set_deadline(valid_until),
            _ => self.state.mark_lost(),
        }
        Ok(outcome)
    }

    /// Gives the permit back and wakes the waiters; stops the watchdog. One
    /// round trip. `Ok(Ownership::Owned)`: it was held until now;
    /// `Ok(Ownership::Expired)`: it had expired already.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before the reply was read, the
    /// guard's `Drop` gives the permit back in the background (the script
    /// is idempotent).
    pub async fn release(mut self) -> Result<Ownership> {
        self.state.finish();
        self.hold_ended();
        let span = release_span(&self.spec.metrics_label, &self.spec.name, &self.token);
        let outcome = release(&self.spec, &self.token).instrument(span).await;
        // A transient error: the request may never have arrived; `Drop`
        // tries once more in the background (and counts what that finds).
        if !matches!(&outcome, Err(e) if e.is_transient()) {
            self.released = true;
            let found = outcome.as_ref().ok().copied();
            crate::vocab::metrics::release_outcome(&self.spec.metrics_label, found);
        }
        outcome
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        self.state.finish();
        if self.released {
            return;
        }
        self.hold_ended();
        let spec = self.spec.clone();
        let token = std::mem::take(&mut self.token);
        let span = release_span(&spec.metrics_label, &spec.name, &token);
        let until = self.state.deadline();
        in_background(
            &self.spec.session,
            "permit guard dropped without release(), or its release failed",
            async move {
                let what = "permit release";
                let outcome =
                    crate::vocab::retry::until_deadline(until, &what, || release(&spec, &token))
                        .await;
                let found = outcome.as_ref().ok().copied();
                crate::vocab::metrics::release_outcome(&spec.metrics_label, found);
                outcome.map(|_| ())
            }
            .instrument(span),
        );
    }
}

/// The release script: `Owned` when the permit was held until now.
pub(crate) async fn release(spec: &SemaphoreSpec, token: &str) -> Result<Ownership> {
    let released: i64 = spec
        .session
        .eval(
            "semaphore release",
            &scripts::SEM_RELEASE,
            &[&spec.key],
            &[
                token.as_bytes(),
                publish_command(&spec.session),
                &spec.channel,
            ],
        )
        .await?;
    Ok(match released {
        1 => Ownership::Owned,
        _ => Ownership::Expired,
    })
}

/// The extend script, with the new deadline when renewed.
async fn extend(spec: &SemaphoreSpec, token: &str) -> Result<(Ownership, Instant)> {
    let sent = Instant::now();
    let ttl = ttl_ms(spec.ttl).to_string();
    let renewed: i64 = spec
        .session
        .eval(
            "semaphore extend",
            &scripts::SEM_EXTEND,
            &[&spec.key],
            &[token.as_bytes(), ttl.as_bytes()],
        )
        .await?;
    let outcome = match renewed {
        1 => Ownership::Owned,
        _ => Ownership::Expired,
    };
    Ok((outcome, sent + spec.ttl - drift(spec.ttl)))
}

/// One permit held, as [`Semaphore::holders`](crate::Semaphore::holders)
/// reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermitHolder {
    /// The holder's owner token.
    pub token: String,
    /// Who holds it (host, pid, since when), parsed from the token; `None`
    /// for a token not made by latchkey.
    pub holder: Option<Holder>,
    /// How long until the permit expires unless renewed (server time).
    pub ttl_left: Duration,
}

/// See [`Semaphore::holders`](crate::Semaphore::holders).
pub(crate) async fn holders(session: &Session, key: &[u8]) -> Result<Vec<PermitHolder>> {
    let (secs, micros): (u64, u64) = session.query("TIME", redis::cmd("TIME"), b"").await?;
    let now = secs * 1000 + micros / 1000;
    let mut range = redis::cmd("ZRANGEBYSCORE");
    range
        .arg(key)
        .arg(format!("({now}"))
        .arg("+inf")
        .arg("WITHSCORES");
    let members: Vec<(Vec<u8>, f64)> = session.query("semaphore holders", range, key).await?;
    Ok(members
        .into_iter()
        .map(|(token, expires)| PermitHolder {
            holder: Holder::from_token(&token),
            token: String::from_utf8_lossy(&token).into_owned(),
            ttl_left: Duration::from_millis((expires as u64).saturating_sub(now)),
        })
        .collect())
}
