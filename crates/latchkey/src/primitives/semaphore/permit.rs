//! [`PermitGuard`]: one hold of a [`Semaphore`](crate::Semaphore), one
//! permit or several taken at once ([`Semaphore::acquire_many`](crate::Semaphore::acquire_many)):
//! a lease (`primitives/lease/`) over the semaphore's scripts, which act on
//! all of a hold's permits together.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::primitives::inspect::Holding;
use crate::primitives::lease::hold::{Hold, HoldKind};
use crate::primitives::lease::options::LeaseOptions;
use crate::primitives::lease::{Lease, LeaseSpec};
use crate::primitives::shared::publish_command;
use crate::transport::session::Session;
use crate::vocab::error::Result;
use crate::vocab::metrics::LockLabel;
use crate::vocab::names::ttl_ms;
use crate::vocab::outcome::{Issued, Ownership, Renewal};
use crate::vocab::protocol::scripts;
use crate::vocab::token::Holder;

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
    /// TTL, watchdog, cap, margin, fencing, asking.
    pub(crate) lease: LeaseOptions,
    pub(crate) metrics_label: LockLabel,
}

/// What a permit's lease holds: the semaphore, and how many permits the
/// hold took (1, or k by `acquire_many`).
#[derive(Clone)]
pub struct PermitHold {
    pub(crate) spec: Arc<SemaphoreSpec>,
    pub(crate) taken: u32,
}

/// A held permit of a [`Semaphore`](crate::Semaphore), or several taken at
/// once ([`Semaphore::acquire_many`](crate::Semaphore::acquire_many): then
/// [`permits`](Hold::permits) says how many; they are renewed,
/// fenced, lost and released together, as one hold).
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let uploads = client.semaphore("uploads", 8, Duration::from_secs(20))?;
/// if let Some(permit) = uploads.try_acquire().await? {
///     println!("permit until {:?}", permit.deadline());
///     // ... one of at most 8 uploads ...
///     permit.extend(Duration::from_secs(20)).await?; // renew it
///     permit.release().await?;
/// }
/// # Ok(()) }
/// ```
///
/// # What it promises
/// While [`is_held`](Hold::is_held) is true, this permit counts
/// towards the semaphore's N and nobody can take it; `release` and `extend`
/// act only on our own permit and say what they found. The promises of the
/// semaphore as a whole are on [`Semaphore`](crate::Semaphore).
///
/// Like a [`LockGuard`](crate::LockGuard), it knows until when it may
/// assume it holds the permit ([`deadline`](Hold::deadline)), and
/// [`lost`](Hold::lost) fires when it no longer can.
///
/// # Dropping
/// Give the permit back with [`release`](Hold::release). A guard
/// dropped without it gives the permit back in the background (tracked by
/// the client, see [`Client::flush`](crate::Client::flush)); without a
/// runtime, or without Redis, the permit frees itself at its TTL.
pub type PermitGuard = Hold<PermitKind>;

/// The kind of a [`PermitGuard`]: a semaphore's hold. Never a value.
#[derive(Debug)]
pub enum PermitKind {}

impl crate::primitives::guard::sealed::Sealed for PermitKind {}

#[allow(private_interfaces)]
impl HoldKind for PermitKind {
    type Spec = PermitHold;
    type Own = ();
    const NAME: &'static str = "PermitGuard";
}

impl Hold<PermitKind> {
    pub(crate) fn new(
        hold: PermitHold,
        token: String,
        fencing_token: Option<u64>,
        valid_until: Instant,
    ) -> Self {
        Hold::with_lease(Lease::new(hold, token, fencing_token, valid_until), ())
    }

    /// How many permits this guard holds: 1, or the `k` of
    /// [`Semaphore::acquire_many`](crate::Semaphore::acquire_many).
    pub fn permits(&self) -> u32 {
        self.lease.hold().taken
    }
}

/// A permit's lease: the semaphore's scripts, over the hold's permits.
impl LeaseSpec for PermitHold {
    hold_basics!(spec);
    shared_hold!(spec);

    fn renew(
        &self,
        token: &str,
        ttl: Duration,
        batch_by: Option<Instant>,
    ) -> impl Future<Output = Renewal> + Send {
        extend(&self.spec, token, self.taken, ttl, batch_by)
    }

    fn release(
        &self,
        token: &str,
        _background: bool,
    ) -> impl Future<Output = Result<Ownership>> + Send {
        release(&self.spec, token, self.taken)
    }

    async fn listen(&self) -> Result<crate::backend::Wakeups> {
        crate::primitives::lease::listen_on(&self.spec.session, &self.spec.channel).await
    }

    /// `sem_fence.lua`: the semaphore's counter, while the permit is held
    /// (for k permits: while the token's own member is, which the others
    /// share their expiry with).
    async fn issue_fence(&self, token: &str, _deadline: Instant) -> Issued {
        let reply: (i64, i64) = self
            .spec
            .session
            .eval(
                "semaphore fence",
                &scripts::SEM_FENCE,
                &[&self.spec.key, &self.spec.fence_key],
                &[token.as_bytes()],
            )
            .await?;
        crate::primitives::shared::fence_reply("semaphore fence", reply, Ownership::Expired)
    }
}

/// The release script: `Owned` when the hold of `taken` permits was held
/// until now.
pub(crate) async fn release(spec: &SemaphoreSpec, token: &str, taken: u32) -> Result<Ownership> {
    let taken = taken.to_string();
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
                taken.as_bytes(),
            ],
        )
        .await?;
    Ok(match released {
        1 => Ownership::Owned,
        _ => Ownership::Expired,
    })
}

/// The extend script over the hold's `taken` permits, with the new
/// deadline when renewed. `batch_by`: see `LeaseSpec::renew`.
pub(crate) async fn extend(
    spec: &SemaphoreSpec,
    token: &str,
    taken: u32,
    ttl: Duration,
    batch_by: Option<Instant>,
) -> Renewal {
    let sent = Instant::now();
    let ttl_arg = ttl_ms(ttl).to_string();
    let taken = taken.to_string();
    let renewed: i64 = spec
        .session
        .eval_renewal(
            "semaphore extend",
            &scripts::SEM_EXTEND,
            &[&spec.key],
            &[token.as_bytes(), ttl_arg.as_bytes(), taken.as_bytes()],
            batch_by,
        )
        .await?;
    let outcome = match renewed {
        1 => Ownership::Owned,
        _ => Ownership::Expired,
    };
    Ok((outcome, crate::vocab::names::valid_until(sent, ttl)))
}

/// See [`Semaphore::holders`](crate::Semaphore::holders).
pub(crate) async fn holders(session: &Session, key: &[u8]) -> Result<Vec<Holding>> {
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
        .map(|(token, expires)| Holding {
            holder: Holder::from_token(&token),
            token: String::from_utf8_lossy(&token).into_owned(),
            ttl: Some(Duration::from_millis((expires as u64).saturating_sub(now))),
        })
        .collect())
}
