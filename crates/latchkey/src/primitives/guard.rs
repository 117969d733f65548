//! [`Guard`]: every hold as one trait object. Each guard ([`LockGuard`],
//! [`PermitGuard`], [`RwGuard`], [`MultiGuard`], [`Leadership`]: the one
//! `Hold<K>`, and [`CachedGuard`]) implements it, so code that handles
//! "some hold" (a supervisor, a binding, a test) is written once, over
//! `Box<dyn Guard>`, where the kind is chosen at run time.
//!
//! [`LockGuard`]: crate::LockGuard
//! [`CachedGuard`]: crate::CachedGuard
//! [`PermitGuard`]: crate::PermitGuard
//! [`RwGuard`]: crate::RwGuard
//! [`MultiGuard`]: crate::MultiGuard
//! [`Leadership`]: crate::Leadership

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::primitives::lease::state::LostSignal;
use crate::vocab::error::Result;
use crate::vocab::outcome::{LostReason, Ownership};

/// What every hold is, as a trait object: a name, an owner token, a
/// deadline, a `lost` signal with its reason, fencing, extension and
/// release. Every [`Hold<K>`](crate::Hold) is one, and so is a
/// [`CachedGuard`](crate::CachedGuard): code that handles "some hold" (a
/// supervisor, a binding, a test) takes a `Box<dyn Guard>` (or any
/// `G: Guard`), and the kind can be chosen at run time. Its futures are
/// boxed (a box beside a round trip costs nothing); `release` and
/// `forget` take the box. What only one kind has (a leadership's
/// `proclaim`, a multi lock's `names`) is reached through
/// [`as_any`](Guard::as_any).
///
/// ```no_run
/// # async fn demo(client: latchkey::Client, permits: Option<u64>) -> latchkey::Result<()> {
/// use std::time::Duration;
/// use latchkey::Guard;
///
/// /// Runs `work` while `guard` holds, whatever kind of hold it is.
/// async fn while_held(guard: Box<dyn Guard>, work: impl std::future::Future<Output = ()>) -> latchkey::Result<()> {
///     let token = guard.fencing_token().await?; // pass it to the resource
///     tokio::select! {
///         _ = guard.lost() => eprintln!("stopped: {}", guard.lost_reason().expect("lost")),
///         _ = work => {}
///     }
///     let _ = token;
///     guard.release().await?;
///     Ok(())
/// }
///
/// let ttl = Duration::from_secs(10);
/// let hold: Box<dyn Guard> = match permits {
///     Some(n) => Box::new(client.semaphore("jobs", n, ttl)?.acquire().await?),
///     None => Box::new(client.lock("jobs", ttl)?.with_watchdog().acquire().await?),
/// };
/// while_held(hold, async { /* the job */ }).await?;
/// # Ok(()) }
/// ```
///
/// Sealed: only latchkey's guards implement it, so methods can be added
/// without breaking anyone. Each method is the guard's own too (no import
/// needed), documented on [`Hold`](crate::Hold), where the promises of
/// every hold are stated.
pub trait Guard: Send + Sync + sealed::Sealed {
    /// See [`Hold::name`](crate::Hold::name).
    fn name(&self) -> &[u8];
    /// See [`Hold::token`](crate::Hold::token).
    fn token(&self) -> &str;
    /// See [`Hold::ttl`](crate::Hold::ttl).
    fn ttl(&self) -> Duration;
    /// See [`Hold::deadline`](crate::Hold::deadline).
    fn deadline(&self) -> Instant;
    /// See [`Hold::is_held`](crate::Hold::is_held).
    fn is_held(&self) -> bool;
    /// See [`Hold::lost`](crate::Hold::lost).
    ///
    /// # Cancel safety
    /// Cancel safe; it can be polled again, or from several places.
    fn lost(&self) -> BoxFuture<'_, ()>;
    /// See [`Hold::lost_signal`](crate::Hold::lost_signal).
    fn lost_signal(&self) -> LostSignal;
    /// See [`Hold::lost_reason`](crate::Hold::lost_reason).
    fn lost_reason(&self) -> Option<LostReason>;
    /// See [`Hold::release_requested`](crate::Hold::release_requested).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it unsubscribes; poll it again to listen again.
    fn release_requested(&self) -> BoxFuture<'_, Result<()>>;
    /// See [`Hold::extend`](crate::Hold::extend).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped after the request was sent, Redis may have reset
    /// the TTL but the deadline stays where it was.
    fn extend(&self, ttl: Duration) -> BoxFuture<'_, Result<Ownership>>;
    /// See [`Hold::confirm`](crate::Hold::confirm).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing changes but, on a reply, what the guard knows.
    fn confirm(&self) -> BoxFuture<'_, Result<Ownership>>;
    /// See [`Hold::fencing_token`](crate::Hold::fencing_token).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call issues no token, or one nobody uses.
    fn fencing_token(&self) -> BoxFuture<'_, Result<u64>>;
    /// See [`Hold::issued_fencing_token`](crate::Hold::issued_fencing_token).
    fn issued_fencing_token(&self) -> Option<u64>;
    /// Every fencing token of the hold, issued as
    /// [`fencing_token`](Guard::fencing_token) issues one: a multi lock's,
    /// one per lock in the order the names were given
    /// ([`MultiGuard::fencing_tokens`](crate::MultiGuard::fencing_tokens));
    /// any other hold's one token.
    ///
    /// # Cancel safety
    /// As [`fencing_token`](Guard::fencing_token).
    fn fencing_tokens(&self) -> BoxFuture<'_, Result<Vec<u64>>> {
        Box::pin(async move { Ok(vec![self.fencing_token().await?]) })
    }
    /// See [`Hold::release`](crate::Hold::release).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before the reply was read, the release is
    /// finished in the background ([`Client::flush`](crate::Client::flush)
    /// waits for it).
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<Ownership>>;
    /// See [`Hold::forget`](crate::Hold::forget).
    fn forget(self: Box<Self>) -> String;
    /// The guard as itself, for the calls of its own kind:
    /// `hold.as_any().downcast_ref::<latchkey::Leadership>()`.
    fn as_any(&self) -> &dyn Any;
}

/// A boxed future of a [`Guard`] (or an [`Acquire`](crate::Acquire)).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What every primitive whose holds are leases lets its builder set (a
/// [`Lock`](crate::Lock), a [`MultiLock`](crate::MultiLock), a
/// [`Semaphore`](crate::Semaphore), a [`RwLock`](crate::RwLock)): code that
/// configures any of them the same way (a command's `--max-hold`, a
/// binding's keyword arguments) is written once over it. Each method is the
/// primitive's own, documented there; sealed, as [`Guard`].
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// use std::time::Duration;
/// use latchkey::HoldOptions;
///
/// fn supervised<P: HoldOptions>(p: P) -> latchkey::Result<P> {
///     p.with_watchdog().with_max_hold(Duration::from_secs(60))
/// }
/// let lock = supervised(client.lock("job", Duration::from_secs(10))?)?;
/// let pool = supervised(client.semaphore("jobs", 4, Duration::from_secs(10))?)?;
/// # let _ = (lock, pool); Ok(()) }
/// ```
pub trait HoldOptions: Sized + sealed::Sealed {
    /// The primitive's name.
    fn name(&self) -> &[u8];
    /// The TTL of every hold.
    fn ttl(&self) -> Duration;
    /// Renews every hold in the background every `ttl / 3`.
    fn with_watchdog(self) -> Self;
    /// Renews every hold in the background every `every`.
    fn with_renewal_every(self, every: Duration) -> Result<Self>;
    /// Caps every hold at `max_hold` from its acquisition.
    fn with_max_hold(self, max_hold: Duration) -> Result<Self>;
    /// Makes `lost()` fire `margin` before the deadline or the cap.
    fn with_stop_margin(self, margin: Duration) -> Result<Self>;
    /// Keeps every hold at least `least` from its acquisition, even when
    /// released before.
    fn with_hold_at_least(self, least: Duration) -> Result<Self>;
    /// Issues the fencing token with every acquisition.
    fn with_fencing(self) -> Self;
    /// Makes every waiting acquisition ask the holders to let go.
    fn with_asking(self) -> Self;
}

pub(crate) mod sealed {
    /// Only latchkey's guards are [`Guard`](super::Guard)s.
    pub trait Sealed {}
}
