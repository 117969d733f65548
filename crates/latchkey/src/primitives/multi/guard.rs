//! [`MultiGuard`]: proof (while it lasts) that we hold every lock of a
//! [`MultiLock`](crate::MultiLock): one lease (`primitives/lease/`) over
//! all their keys, with one fencing token per lock.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::primitives::lease::hold::{Hold, HoldKind};
use crate::primitives::lease::{Lease, LeaseSpec};
use crate::primitives::multi::spec::MultiSpec;
use crate::vocab::error::{Error, Result};
use crate::vocab::outcome::{Issued, Ownership, Renewal};
use crate::vocab::token::short;

/// Every lock of a [`MultiLock`](crate::MultiLock), held together.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let both = client.lock_all(&["account:1", "account:2"], Duration::from_secs(10))?;
/// let guard = both.acquire_until(Duration::from_secs(5)).await?;
///
/// // One token per lock, in the order the names were given.
/// let tokens = guard.fencing_tokens().await?;
/// println!("account:1 with token {}, account:2 with {}", tokens[0], tokens[1]);
/// assert_eq!(guard.fencing_token_of("account:2").await?, tokens[1]);
/// guard.release().await?; // both, at once
/// # Ok(()) }
/// ```
///
/// # What it promises
/// While [`is_held`](Hold::is_held) is true, nobody else holds any
/// of the locks, unless Redis lost a key (see [`Lock`](crate::Lock),
/// "Limits"). Each lock's key holds our one owner token, exactly as an
/// ordinary lock's does: to other clients, `latchkey status` and
/// [`Client::revoke`](crate::Client::revoke) each is a lock held by us.
/// [`lost`](Hold::lost) fires when *any* of them can no longer be
/// proven ours (a renewal finds one gone or taken: revoked, deleted,
/// expired); then stop touching every resource, and release the guard
/// (which gives back the locks still ours). One watchdog renews them all;
/// [`extend`](Hold::extend) resets every TTL, and finds them lost if
/// one is not ours any more. [`release`](Hold::release) releases
/// every lock still ours and wakes each one's waiters (plain [`Lock`](crate::Lock)s
/// too); its [`Ownership`](crate::Ownership) is the worst lock's.
///
/// # Dropping
/// As a [`LockGuard`](crate::LockGuard): dropped without
/// [`release`](Hold::release), every lock is released in the
/// background ([`Client::flush`](crate::Client::flush) waits for it); without a
/// runtime, or without Redis, each frees itself at its TTL.
pub type MultiGuard = Hold<MultiKind>;

/// The kind of a [`MultiGuard`]: several locks held together. Never a
/// value.
#[derive(Debug)]
pub enum MultiKind {}

impl crate::primitives::guard::sealed::Sealed for MultiKind {}

#[allow(private_interfaces)]
impl HoldKind for MultiKind {
    type Spec = Arc<MultiSpec>;
    /// Every lock's fencing token, in key order: with the hold (made
    /// `with_fencing`) or on the first request.
    type Own = tokio::sync::OnceCell<Vec<u64>>;
    const NAME: &'static str = "MultiGuard";

    /// The first lock's (of the name given first): issues every lock's, as
    /// [`MultiGuard::fencing_tokens`] does.
    async fn fencing_token(hold: &MultiGuard) -> Result<u64> {
        let tokens = hold.fencing_tokens().await?;
        tokens
            .first()
            .copied()
            .ok_or_else(|| Error::Internal("a multi lock without locks".into()))
    }

    fn issued_fencing_token(hold: &MultiGuard) -> Option<u64> {
        hold.issued_fencing_tokens()?.first().copied()
    }

    fn fencing_tokens(hold: &MultiGuard) -> crate::BoxFuture<'_, Result<Vec<u64>>> {
        Box::pin(hold.fencing_tokens())
    }
}

impl Hold<MultiKind> {
    pub(crate) fn new(
        spec: Arc<MultiSpec>,
        token: String,
        fences: Option<Vec<u64>>,
        valid_until: Instant,
    ) -> Self {
        Hold::with_lease(
            Lease::new(spec, token, None, valid_until),
            tokio::sync::OnceCell::new_with(fences),
        )
    }

    /// The locks' names, in the order they were given.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &[u8]> {
        self.lease.hold().names()
    }

    /// One fencing token per lock, in the order the names were given: each
    /// greater than the tokens of every earlier hold of that lock (plain
    /// or multi), so pass each with the writes to what that lock guards.
    ///
    /// Ready at once when they came with the hold (made
    /// [`with_fencing`](crate::MultiLock::with_fencing)); otherwise issued
    /// on the first call, each lock's by its own script while it is still
    /// ours (all sent at once: one round trip on one server), and the same
    /// on every later call. Fails with [`Error::NotHeld`] naming a lock
    /// that is no longer ours (and marks the guard lost).
    ///
    /// # Cancel safety
    /// Cancel safe. Dropped after the requests were sent, counters may have
    /// moved on without us keeping the tokens; the next call issues others,
    /// which are just as good. The locks stay held either way.
    pub async fn fencing_tokens(&self) -> Result<Vec<u64>> {
        let fences = self
            .own
            .get_or_try_init(|| async {
                let spec = self.lease.hold();
                match spec.issue_fences(self.lease.token()).await? {
                    Ok(fences) => Ok(fences),
                    Err((index, outcome)) => {
                        let name = String::from_utf8_lossy(&spec.members[index].name);
                        tracing::warn!(lock = %name, token = short(self.lease.token()), ?outcome, "fencing token refused: the lock is no longer ours");
                        self.lease.state().mark_lost(crate::vocab::outcome::LostReason::from_check(outcome, false));
                        Err(Error::NotHeld {
                            name: name.into_owned(),
                        })
                    }
                }
            })
            .await?;
        Ok(self.in_given_order(fences))
    }

    /// The fencing token of the lock `name` (one of the names given): see
    /// [`fencing_tokens`](Hold::fencing_tokens), which it calls.
    /// Fails with [`Error::InvalidInput`] for a name that is not one of them.
    ///
    /// # Cancel safety
    /// As [`fencing_tokens`](Hold::fencing_tokens).
    pub async fn fencing_token_of(&self, name: impl AsRef<[u8]>) -> Result<u64> {
        let name = name.as_ref();
        let Some(at) = self.names().position(|n| n == name) else {
            return Err(Error::InvalidInput(format!(
                "{:?} is not one of the locks of this hold",
                String::from_utf8_lossy(name)
            )));
        };
        Ok(self.fencing_tokens().await?[at])
    }

    /// Which lock of this hold is no longer ours, in the order the names
    /// were given (asks Redis: one read per lock); `None` when every one
    /// still holds our token. What to name after [`lost`](Hold::lost)
    /// fired.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn lost_lock(&self) -> Result<Option<Vec<u8>>> {
        let spec = self.lease.hold();
        for &i in spec.given.iter() {
            let member = &spec.members[i];
            let value: Option<Vec<u8>> = spec
                .session
                .query(
                    "multi lost lock",
                    redis::cmd("GET").arg(&member.keys.key).clone(),
                    &member.keys.key,
                )
                .await?;
            let token = self.lease.token().as_bytes();
            let ours = value.as_deref().is_some_and(|v| {
                v.strip_suffix(crate::vocab::protocol::WAITING_MARK.as_bytes())
                    .unwrap_or(v)
                    == token
            });
            if !ours {
                return Ok(Some(member.name.to_vec()));
            }
        }
        Ok(None)
    }

    /// The fencing tokens (in the order the names were given), if issued
    /// already (at acquisition, or by an earlier call). Asks nobody.
    pub fn issued_fencing_tokens(&self) -> Option<Vec<u64>> {
        self.own.get().map(|f| self.in_given_order(f))
    }

    /// `fences` (in key order) in the order the names were given.
    fn in_given_order(&self, fences: &[u64]) -> Vec<u64> {
        self.lease.hold().given.iter().map(|&i| fences[i]).collect()
    }
}

/// A multi lock's lease: its scripts (or each lock's, one lock after the
/// other), over every lock's keys.
impl LeaseSpec for Arc<MultiSpec> {
    hold_basics!();

    fn tracker(&self) -> &tokio_util::task::TaskTracker {
        &self.session.inner.background
    }

    fn live(&self) -> &crate::transport::live::LiveHolds {
        &self.session.inner.live
    }

    fn renew(
        &self,
        token: &str,
        ttl: Duration,
        batch_by: Option<Instant>,
    ) -> impl Future<Output = Renewal> + Send {
        MultiSpec::extend(self, token, ttl, batch_by)
    }

    fn release(
        &self,
        token: &str,
        _background: bool,
    ) -> impl Future<Output = Result<Ownership>> + Send {
        MultiSpec::release(self, token)
    }

    /// Never asked: the guard issues one token per lock itself
    /// ([`MultiGuard::fencing_tokens`]).
    async fn issue_fence(&self, _token: &str, _deadline: Instant) -> Issued {
        Err(Error::Unsupported(
            "a multi lock has one fencing token per lock: MultiGuard::fencing_tokens",
        ))
    }

    /// A request to let go of any of the locks (each one's release channel).
    fn listen(&self) -> impl Future<Output = Result<crate::backend::Wakeups>> + Send {
        self.subscribe_all()
    }
}
