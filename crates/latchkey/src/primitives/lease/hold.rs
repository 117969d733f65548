//! [`Hold<K>`]: the one public hold type. A lock's guard, a semaphore's
//! permit, a read-write lock's side, a multi lock's locks and an election's
//! leadership are each `Hold<K>` for their kind `K` (`LockGuard` is
//! `Hold<LockKind>`, as parking_lot's `Mutex<T>` is
//! `lock_api::Mutex<RawMutex, T>`): the surface below is written once, over
//! the [`Lease`] inside, and what only one kind has sits in an
//! `impl Hold<ThatKind>` beside the kind.

use std::time::{Duration, Instant};

use crate::primitives::guard::{BoxFuture, Guard};
use crate::primitives::lease::state::LostSignal;
use crate::primitives::lease::{Lease, LeaseSpec};
use crate::vocab::error::Result;
use crate::vocab::outcome::{LostReason, Ownership};
use crate::vocab::token::short;

/// A kind of hold: the type parameter of [`Hold`]. Sealed: latchkey's five
/// kinds ([`LockKind`](crate::LockKind), [`PermitKind`](crate::PermitKind),
/// [`RwKind`](crate::RwKind), [`MultiKind`](crate::MultiKind),
/// [`LeaderKind`](crate::LeaderKind)) are the only ones; they are never
/// values, only names of a kind.
// The associated types and hooks are the crate's own (its scripts, its
// per-kind state): public only so that `Hold<K>` can be, and hidden.
#[allow(private_bounds, private_interfaces)]
pub trait HoldKind:
    crate::primitives::guard::sealed::Sealed + Sized + Send + Sync + 'static
{
    /// What the kind's lease holds: its scripts and options.
    #[doc(hidden)]
    type Spec: LeaseSpec;
    /// What a hold of this kind keeps beside its lease (a multi lock's
    /// tokens, a leadership's value).
    #[doc(hidden)]
    type Own: Send + Sync;
    /// The public name, for `Debug`.
    #[doc(hidden)]
    const NAME: &'static str;

    /// [`Hold::fencing_token`]: the lease's one token, unless the kind has
    /// another rule (a multi lock: its first lock's).
    #[doc(hidden)]
    fn fencing_token(hold: &Hold<Self>) -> impl std::future::Future<Output = Result<u64>> + Send {
        hold.lease.fencing_token()
    }

    /// [`Hold::issued_fencing_token`], as [`HoldKind::fencing_token`].
    #[doc(hidden)]
    fn issued_fencing_token(hold: &Hold<Self>) -> Option<u64> {
        hold.lease.issued_fencing_token()
    }

    /// [`Guard::fencing_tokens`](crate::Guard::fencing_tokens): the one
    /// token, unless the kind has one per lock.
    #[doc(hidden)]
    fn fencing_tokens(hold: &Hold<Self>) -> BoxFuture<'_, Result<Vec<u64>>> {
        Box::pin(async move { Ok(vec![hold.fencing_token().await?]) })
    }
}

/// A hold: proof, while it lasts, that we hold what it holds. Every guard
/// is one: [`LockGuard`](crate::LockGuard) (`Hold<LockKind>`),
/// [`PermitGuard`](crate::PermitGuard), [`RwGuard`](crate::RwGuard),
/// [`MultiGuard`](crate::MultiGuard), [`Leadership`](crate::Leadership);
/// each kind's page adds what only it has.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let guard = client.lock("invoices", Duration::from_secs(10))?.acquire().await?;
/// let token = guard.fencing_token().await?; // pass it with every write
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lost: {}", guard.lost_reason().expect("lost")),
///     _ = async { /* the work, writing with `token` */ } => {}
/// }
/// guard.release().await?;
/// # let _ = token; Ok(()) }
/// ```
///
/// # What every hold promises
/// While [`is_held`](Hold::is_held) is true, nobody else holds what it
/// holds (within the limits of the primitive, see its docs).
/// [`lost`](Hold::lost) completes when that can no longer be proven: at
/// once when the hold is found gone (a renewal, a check after a revocation
/// or a foreign release was heard on its channel, or after the connection
/// came back), and otherwise a *stop margin* before its deadline or its cap
/// (default a fifth of the TTL, `with_stop_margin` on every builder), so a
/// holder that stops within the margin is gone before anyone else can take
/// it. [`lost_reason`](Hold::lost_reason) then says why. `release` and
/// `extend` act only on our own hold and say what they found
/// ([`Ownership`]).
///
/// # When a hold ends
/// Only when the program releases it ([`release`](Hold::release)), it is
/// lost (and `lost` says so), or it is given up ([`forget`](Hold::forget)).
/// A guard dropped without one of these is released in the background
/// (owner-only, so never someone else's), with a warning;
/// [`Client::flush`](crate::Client::flush) waits for it. Without a runtime,
/// or without Redis, the hold frees itself at its TTL.
#[must_use = "the hold is released (in the background) when the guard is dropped"]
pub struct Hold<K: HoldKind> {
    pub(crate) lease: Lease<K::Spec>,
    pub(crate) own: K::Own,
}

impl<K: HoldKind> std::fmt::Debug for Hold<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(K::NAME)
            .field("name", &String::from_utf8_lossy(self.name()))
            .field("token", &short(self.token()))
            .field("fencing_token", &self.issued_fencing_token())
            .field("held", &self.is_held())
            .finish()
    }
}

impl<K: HoldKind> Hold<K> {
    /// A hold over `lease`, with what its kind keeps beside it.
    pub(crate) fn with_lease(lease: Lease<K::Spec>, own: K::Own) -> Self {
        Hold { lease, own }
    }

    /// The primitive's name (a multi lock's: the names joined by `+`).
    pub fn name(&self) -> &[u8] {
        self.lease.name()
    }

    /// Our owner token: what Redis keeps for the hold while it is ours.
    pub fn token(&self) -> &str {
        self.lease.token()
    }

    /// Until when we may assume we hold it (monotonic clock): computed from
    /// when the acquiring (or last successful extending) request was
    /// *sent*, minus a drift allowance (`ttl / 100 + 2 ms`). Past it the
    /// hold may already be someone else's.
    pub fn deadline(&self) -> Instant {
        self.lease.deadline()
    }

    /// True while ownership is not known to be lost and the stop margin
    /// before the deadline (or the cap) has not come. Asks nobody; a `true`
    /// is a statement about the past request, not a promise: use fencing
    /// tokens where that matters.
    pub fn is_held(&self) -> bool {
        self.lease.is_held()
    }

    /// Completes when the hold can no longer be proven ours: at once when a
    /// renewal, an extension, or a check finds it gone or taken (the hold
    /// checks itself when it hears a revocation or a foreign release on its
    /// channel, and when the connection comes back after a drop), otherwise
    /// the stop margin before its deadline (which the watchdog keeps
    /// pushing out while renewals succeed) or its cap. Stop working on the
    /// protected resource when it completes; [`lost_reason`](Self::lost_reason)
    /// says why.
    ///
    /// # Cancel safety
    /// Cancel safe; it can be polled again, or from several places.
    pub async fn lost(&self) {
        self.lease.lost().await
    }

    /// A handle on the [`lost`](Self::lost) signal that outlives the borrow
    /// of the guard: clone it into the tasks that must stop when the hold
    /// is lost. Needs a tokio runtime: without a watchdog, a small task is
    /// started to fire it at the deadline.
    pub fn lost_signal(&self) -> LostSignal {
        self.lease.lost_signal()
    }

    /// Why the hold was lost, once [`lost`](Self::lost) fired (or its stop
    /// margin passed): revoked, its max hold, its TTL, gone from Redis,
    /// taken over, Redis unreachable. `None` while held.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.lease.lost_reason()
    }

    /// Completes when another process asks for the hold: a call of
    /// [`Client::request_release`](crate::Client::request_release)
    /// (`latchkey request-release NAME`), or a waiter made `with_asking`.
    /// Cooperative: nothing is taken away; release when it suits you (or
    /// ignore it). Costs nothing until polled: it subscribes to the
    /// primitive's channel then (one per client, shared), so a request made
    /// before the first poll is not seen (pub/sub keeps nothing). Fails only
    /// when the subscription does.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it unsubscribes; poll it again to listen again.
    pub async fn release_requested(&self) -> Result<()> {
        self.lease.release_requested().await
    }

    /// Resets the hold's TTL to `ttl` from now, if it is still ours;
    /// otherwise marks the guard lost. One round trip. With a watchdog, its
    /// later renewals keep the hold at least until `ttl` from now (a `ttl`
    /// longer than the hold's is not undone by the next renewal). A `ttl`
    /// that would take the hold past its max hold is refused with
    /// [`Error::MaxHoldReached`](crate::Error::MaxHoldReached), and nothing
    /// changes.
    ///
    /// # Cancel safety
    /// Cancel safe. Dropped after the request was sent, Redis may have reset
    /// the TTL, but the guard's deadline stays where it was: the guard
    /// never assumes more than a reply proved, and the watchdog (if any)
    /// goes on.
    pub async fn extend(&self, ttl: Duration) -> Result<Ownership> {
        self.lease.extend(ttl).await
    }

    /// Proves the hold still ours by one round trip that leaves its expiry
    /// where it is; otherwise marks the guard lost (a hold about to end,
    /// with less than [`MIN_TTL`](crate::limits::MIN_TTL) left, is
    /// `Expired` without a round trip). What a supervisor asks before it
    /// starts work on a hold it may have waited on.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing changes but, on a reply, what the guard knows.
    pub async fn confirm(&self) -> Result<Ownership> {
        self.lease.confirm().await
    }

    /// The fencing token of this hold: greater than the token of every
    /// earlier hold, smaller than that of every later one. Pass it with
    /// every write to the resource, so that it can reject a stale holder's
    /// writes (see [`Client::fenced`](crate::Client::fenced)).
    ///
    /// Ready at once when it came with the hold (made `with_fencing`; a
    /// leadership's is its term); otherwise issued on the first call by one
    /// round trip (a script that checks that the hold is still ours and
    /// bumps the fencing counter), and the same on every later call.
    /// Extensions keep it. Fails with [`Error::NotHeld`](crate::Error::NotHeld)
    /// when the hold is no longer ours (and marks the guard lost): a token
    /// issued then could outrank the new holder's. A reader's hold of a
    /// read-write lock has none ([`Error::Unsupported`](crate::Error::Unsupported));
    /// a multi lock's is its first lock's (every lock's:
    /// [`MultiGuard::fencing_tokens`](crate::MultiGuard::fencing_tokens)).
    ///
    /// # Cancel safety
    /// Cancel safe. Dropped after the request was sent, the counter may
    /// have moved on without us keeping the token; the next call issues
    /// another one, which is just as good. The hold stays held either way.
    pub async fn fencing_token(&self) -> Result<u64> {
        K::fencing_token(self).await
    }

    /// The fencing token, if it was issued already (at acquisition, or by
    /// an earlier `fencing_token` call). Asks nobody.
    pub fn issued_fencing_token(&self) -> Option<u64> {
        K::issued_fencing_token(self)
    }

    /// Releases the hold if it is still ours (owner-only), wakes the
    /// waiters, and stops the watchdog. One round trip.
    ///
    /// `Ok(Ownership::Owned)`: it was ours until now and is free; `Expired`
    /// or `HeldByOther`: it was no longer ours (nothing was changed). A
    /// transient error (Redis restarting or failing over, no answer in
    /// time) is retried by the one failure policy while the deadline has
    /// not passed, so a release that lands in an outage still frees it when
    /// Redis is back; past the deadline it is tried once more in the
    /// background, and then it ends by itself at its TTL. (A retry after a
    /// lost reply may find it freed by the first request already: then it
    /// says `Expired`.)
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before the reply was read, the release is
    /// finished in the background, as for a guard dropped without release;
    /// [`Client::flush`](crate::Client::flush) waits for it.
    pub async fn release(mut self) -> Result<Ownership> {
        self.lease.release().await
    }

    /// Gives up the guard without releasing the hold: the watchdog stops,
    /// nothing is released in the background, and the hold ends at its TTL,
    /// or by a release with the returned owner token (the CLI's
    /// `latchkey acquire` keeps a lock this way after it exits).
    pub fn forget(self) -> String {
        self.lease.forget()
    }

    /// How long an acquisition or a renewal of the hold holds for.
    pub fn ttl(&self) -> Duration {
        self.lease.ttl()
    }
}

// Every hold is a `Guard`: the methods above, boxed.
impl<K: HoldKind> crate::primitives::guard::sealed::Sealed for Hold<K> {}

impl<K: HoldKind> Guard for Hold<K> {
    fn name(&self) -> &[u8] {
        Hold::name(self)
    }
    fn token(&self) -> &str {
        Hold::token(self)
    }
    fn ttl(&self) -> Duration {
        Hold::ttl(self)
    }
    fn deadline(&self) -> Instant {
        Hold::deadline(self)
    }
    fn is_held(&self) -> bool {
        Hold::is_held(self)
    }
    fn lost(&self) -> BoxFuture<'_, ()> {
        Box::pin(Hold::lost(self))
    }
    fn lost_signal(&self) -> LostSignal {
        Hold::lost_signal(self)
    }
    fn lost_reason(&self) -> Option<LostReason> {
        Hold::lost_reason(self)
    }
    fn release_requested(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(Hold::release_requested(self))
    }
    fn extend(&self, ttl: Duration) -> BoxFuture<'_, Result<Ownership>> {
        Box::pin(Hold::extend(self, ttl))
    }
    fn confirm(&self) -> BoxFuture<'_, Result<Ownership>> {
        Box::pin(Hold::confirm(self))
    }
    fn fencing_token(&self) -> BoxFuture<'_, Result<u64>> {
        Box::pin(Hold::fencing_token(self))
    }
    fn issued_fencing_token(&self) -> Option<u64> {
        Hold::issued_fencing_token(self)
    }
    fn fencing_tokens(&self) -> BoxFuture<'_, Result<Vec<u64>>> {
        K::fencing_tokens(self)
    }
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<Ownership>> {
        Box::pin(Hold::release(*self))
    }
    fn forget(self: Box<Self>) -> String {
        Hold::forget(*self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
