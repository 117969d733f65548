//! [`LockGuard`]: proof (while it lasts) that we hold a lock: the one
//! [`Hold`] of the lock's kind, a lease (`primitives/lease/`) over the
//! lock's backend, plus the extension a fair hand-off needs.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::primitives::lease::hold::{Hold, HoldKind};
use crate::primitives::lease::state::State;
use crate::primitives::lease::{Lease, LeaseSpec};
use crate::primitives::lock::spec::{LockSpec, Replicated};
use crate::vocab::error::Result;
use crate::vocab::names::LockKeys;
use crate::vocab::outcome::{Issued, Ownership, Renewal};
use crate::vocab::token::short;

/// A held lock: [`Hold`] of a [`Lock`](crate::Lock), with the surface of
/// every hold.
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
/// While [`is_held`](Hold::is_held) is true (before the deadline, not
/// [lost](Hold::lost)), nobody else holds the lock, unless Redis lost
/// the key (see [`Lock`](crate::Lock), "Limits"). `release` and `extend` act
/// only on our own hold and say what they found ([`Ownership`](crate::Ownership)).
/// Its fencing tokens are greater than those of all earlier holds.
///
/// The guard knows until when it may assume it holds the lock: its
/// [`deadline`](Hold::deadline), on the monotonic clock, computed from
/// when the acquiring (or last successful extending) request was *sent*,
/// minus a drift allowance (`ttl / 100 + 2 ms`). Past the deadline the lock
/// may already belong to someone else.
///
/// # Fencing
/// [`fencing_token`](Hold::fencing_token) on a [`Redlock`](crate::Redlock)
/// takes one round to all instances, plus the raise round under
/// [`Fencing::Strict`](crate::Fencing::Strict). For a lock made
/// [`with_replicas`](crate::Lock::with_replicas), a token issued after
/// acquisition counts only once the replicas acknowledged it (a second
/// request, as at acquisition); too few fail with
/// [`Error::TooFewReplicas`](crate::Error::TooFewReplicas): the lock stays
/// held, and the next call issues another token.
///
/// # Dropping
/// Release a guard with [`release`](Hold::release), which tells you
/// whether you still held it. A guard dropped without that stops its
/// watchdog, logs a warning, and releases the lock in the background
/// (compare-and-delete with its token, so never someone else's lock) if a
/// tokio runtime is running; if none is, or Redis cannot be reached, the
/// lock frees itself when its TTL runs out.
pub type LockGuard = Hold<LockKind>;

/// The kind of a [`LockGuard`]: a lock's hold. Never a value.
#[derive(Debug)]
pub enum LockKind {}

impl crate::primitives::guard::sealed::Sealed for LockKind {}

#[allow(private_interfaces)]
impl HoldKind for LockKind {
    type Spec = Arc<LockSpec>;
    type Own = ();
    const NAME: &'static str = "LockGuard";
}

impl Hold<LockKind> {
    pub(crate) fn new(
        lock: Arc<LockSpec>,
        token: String,
        fencing_token: Option<u64>,
        valid_until: Instant,
    ) -> Self {
        Hold::with_lease(Lease::new(lock, token, fencing_token, valid_until), ())
    }

    /// A new fencing token for this hold, above all issued before: each
    /// local hold of a hold kept while idle asks for its own.
    pub(crate) async fn fresh_fencing_token(&self) -> Result<u64> {
        self.lease.fresh_fencing_token().await
    }

    /// A fair lock's hand-off sets a short TTL (the waiter lease, so that a
    /// waiter that died in between frees the lock soon): bring it to the
    /// lock's TTL a sixth of a `lease` before the hold's stop margin (a hold
    /// released before costs no extension), in the background, as the
    /// watchdog would; retried until the guard's deadline while Redis does
    /// not answer.
    pub(crate) fn extend_after_handoff(&self, lease: Duration) {
        let stop_at = self.lease.state().stop_at();
        let at = stop_at.checked_sub(lease / 6).unwrap_or(stop_at);
        let lock = self.lease.hold();
        let (backend, keys, token) = (
            lock.backend.clone(),
            lock.keys.clone(),
            self.token().to_owned(),
        );
        let ttl = lock.lease.ttl;
        let state = Arc::downgrade(self.lease.state());
        // No task until it is due: most holds are released before (see
        // `transport/deferred.rs`), and then this finds the guard finished.
        let job: crate::transport::deferred::Job = Box::new(move || {
            let Some(state) = state.upgrade().filter(|s| !s.is_finished()) else {
                return;
            };
            tokio::spawn(extend_handed(backend, keys, token, ttl, state));
        });
        match &lock.backend {
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
}

/// A lock's lease: the backend's scripts, and this client's local queue
/// for the name (its holds counted, its waiters woken by a release).
impl LeaseSpec for Arc<LockSpec> {
    hold_basics!();

    fn tracker(&self) -> &tokio_util::task::TaskTracker {
        self.backend.background()
    }

    fn live(&self) -> &crate::transport::live::LiveHolds {
        self.backend.live()
    }

    fn renew(
        &self,
        token: &str,
        ttl: Duration,
        batch_by: Option<Instant>,
    ) -> impl Future<Output = Renewal> + Send {
        self.backend.extend(&self.keys, token, ttl, batch_by)
    }

    fn release(
        &self,
        token: &str,
        background: bool,
    ) -> impl Future<Output = Result<Ownership>> + Send {
        crate::primitives::lock::release::release(
            &self.backend,
            &self.keys,
            &self.local,
            token,
            background,
        )
    }

    /// The backend's fencing script, then (a lock made `with_replicas`)
    /// the replicas' acknowledgement of the counter.
    async fn issue_fence(&self, token: &str, deadline: Instant) -> Issued {
        let issued = self
            .backend
            .issue_fence(&self.keys, token, deadline)
            .await?;
        let Ok(fence) = issued else {
            return Ok(issued);
        };
        match self.confirm_replicas(token, deadline).await? {
            Replicated::Enough => Ok(Ok(fence)),
            Replicated::TooFew(acked) => Err(self.too_few_replicas(acked)),
            Replicated::Gone(outcome) => Ok(Err(outcome)),
        }
    }

    fn listen(&self) -> impl Future<Output = Result<crate::backend::Wakeups>> + Send {
        self.backend.wakeups(&self.keys)
    }

    fn began(&self) {
        self.local.hold();
    }

    fn ended(&self) {
        self.local.unhold();
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
    // Capped when it runs, not when it was planned: a hold that reached its
    // max hold meanwhile keeps the hand-off's short TTL, and one near it is
    // not taken past it.
    let Some(ttl) = crate::primitives::lease::renew::capped(ttl, state.cap) else {
        return;
    };
    // The one failure policy, bounded by the deadline (past it the
    // extension is worthless: the deadline fires `lost`).
    let until = state.deadline();
    let extending = crate::vocab::retry::until_deadline(until, &"hand-off extension", || {
        backend.extend(&keys, &token, ttl, None)
    });
    let result = tokio::select! {
        _ = done.cancelled() => return,
        r = tokio::time::timeout_at(until.into(), extending) => r,
    };
    match result {
        Ok(Ok((Ownership::Owned, valid_until))) if valid_until > state.deadline() => {
            state.set_deadline(valid_until);
        }
        Ok(Ok((Ownership::Owned, _))) => {}
        Ok(Ok((outcome, _))) => {
            tracing::warn!(
                token = short(&token),
                ?outcome,
                "a handed-over lock was gone before it was extended; lock lost"
            );
            state.mark_lost(crate::vocab::outcome::LostReason::from_check(
                outcome, false,
            ));
        }
        // Failed for good, or the deadline came first: the deadline fires
        // `lost` (the watchdog, if any, goes on).
        _ => {}
    }
}
