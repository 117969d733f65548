//! [`Guard`]: the one door of every hold. Each guard ([`LockGuard`],
//! [`CachedGuard`], [`PermitGuard`], [`RwGuard`], [`MultiGuard`],
//! [`Leadership`]) is a lease underneath and implements it, so code that
//! handles "some hold" (a supervisor, a binding, a test) is written once,
//! generic over `G: Guard`, or over `Box<dyn DynGuard>` where the kind is
//! chosen at run time.
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

/// What every hold is: a name, an owner token, a deadline, a `lost`
/// signal with its reason, fencing, extension and release.
///
/// ```no_run
/// # async fn demo() -> latchkey::Result<()> {
/// use std::time::Duration;
/// use latchkey::Guard;
///
/// /// Runs `work` while `guard` holds, whatever kind of hold it is.
/// async fn while_held<G: Guard>(guard: G, work: impl std::future::Future<Output = ()>) -> latchkey::Result<()> {
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
/// let client = latchkey::Client::connect("redis://127.0.0.1:6380/").await?;
/// let lock = client.lock("report", Duration::from_secs(10))?.with_watchdog();
/// while_held(lock.acquire().await?, async { /* the report */ }).await?;
/// let uploads = client.semaphore("uploads", 4, Duration::from_secs(10))?;
/// while_held(uploads.acquire().await?, async { /* one upload */ }).await?;
/// # Ok(()) }
/// ```
///
/// Sealed: only latchkey's guards implement it, so methods can be added
/// without breaking anyone. Every guard also has these methods as its own
/// (no import needed); import the trait to be generic over them.
///
/// # What every hold promises
/// While [`is_held`](Guard::is_held) is true, nobody else holds what it
/// holds (within the limits of the primitive, see its docs).
/// [`lost`](Guard::lost) completes when that can no longer be proven: at
/// once when the hold is found gone (a renewal, a check after a revocation
/// was heard on its channel, or after the connection came back), and
/// otherwise a *stop margin* before its deadline or its cap (default a
/// fifth of the TTL, `with_stop_margin` on every builder), so a holder that
/// stops within the margin is gone before anyone else can take it.
/// [`lost_reason`](Guard::lost_reason) then says why.
pub trait Guard: Send + Sync + sealed::Sealed {
    /// The primitive's name (a multi lock's: the names joined by `+`).
    fn name(&self) -> &[u8];

    /// Our owner token: what Redis keeps for the hold while it is ours.
    fn token(&self) -> &str;

    /// How long an acquisition or a renewal holds for.
    fn ttl(&self) -> Duration;

    /// Until when we may assume we hold it (monotonic clock): from when the
    /// acquiring (or last successful extending) request was *sent*, minus a
    /// drift allowance (`ttl / 100 + 2 ms`).
    fn deadline(&self) -> Instant;

    /// True while the hold is not known lost and the stop margin before
    /// its deadline (or cap) has not come. Asks nobody.
    fn is_held(&self) -> bool;

    /// Completes when the hold can no longer be proven ours (see the trait
    /// docs); stop working on the protected resource then.
    ///
    /// # Cancel safety
    /// Cancel safe; it can be polled again, or from several places.
    fn lost(&self) -> impl Future<Output = ()> + Send;

    /// A handle on the [`lost`](Guard::lost) signal that outlives the
    /// borrow of the guard. Needs a tokio runtime (the watch of a hold
    /// without a watchdog starts then).
    fn lost_signal(&self) -> LostSignal;

    /// Why the hold was lost, once [`lost`](Guard::lost) fired (or its stop
    /// margin passed); `None` while it is held.
    fn lost_reason(&self) -> Option<LostReason>;

    /// Completes when another process asks for the hold
    /// ([`Client::request_release`](crate::Client::request_release),
    /// `latchkey request-release`, a waiter made `with_asking`). Cooperative:
    /// nothing is taken away. Fails only when the subscription does.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it unsubscribes; poll it again to listen again.
    fn release_requested(&self) -> impl Future<Output = Result<()>> + Send;

    /// Resets the hold's TTL to `ttl` from now if it is still ours;
    /// otherwise marks it lost. One round trip. With a watchdog, later
    /// renewals keep it at least that long; past the hold's cap it is
    /// refused ([`Error::MaxHoldReached`](crate::Error::MaxHoldReached)).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped after the request was sent, Redis may have reset
    /// the TTL but the deadline stays where it was.
    fn extend(&self, ttl: Duration) -> impl Future<Output = Result<Ownership>> + Send;

    /// Proves the hold still ours by one round trip that leaves its expiry
    /// where it is; otherwise marks it lost.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing changes but, on a reply, what the guard knows.
    fn confirm(&self) -> impl Future<Output = Result<Ownership>> + Send;

    /// The hold's fencing token, greater than every earlier hold's: ready
    /// when it came with the hold, otherwise issued by one round trip on the
    /// first call (a multi lock's: its first lock's; every lock's is on
    /// [`MultiGuard`](crate::MultiGuard)). A reader of a read-write lock has
    /// none ([`Error::Unsupported`](crate::Error::Unsupported)).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call issues no token, or one nobody uses.
    fn fencing_token(&self) -> impl Future<Output = Result<u64>> + Send;

    /// The fencing token, if it was issued already. Asks nobody.
    fn issued_fencing_token(&self) -> Option<u64>;

    /// Every fencing token of the hold: one, or one per lock of a multi
    /// lock (in the order the names were given), issued as
    /// [`fencing_token`](Guard::fencing_token) issues one.
    ///
    /// # Cancel safety
    /// As [`fencing_token`](Guard::fencing_token).
    fn fencing_tokens(&self) -> impl Future<Output = Result<Vec<u64>>> + Send {
        async move { Ok(vec![self.fencing_token().await?]) }
    }

    /// Every fencing token, if issued already. Asks nobody.
    fn issued_fencing_tokens(&self) -> Option<Vec<u64>> {
        self.issued_fencing_token().map(|t| vec![t])
    }

    /// Releases the hold if it is still ours, wakes the waiters and stops
    /// the watchdog: what it found.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before the reply was read, the release is
    /// finished in the background ([`Client::flush`](crate::Client::flush)
    /// waits for it).
    fn release(self) -> impl Future<Output = Result<Ownership>> + Send
    where
        Self: Sized;

    /// Gives the guard up without releasing: the hold ends at its TTL, or
    /// by a release with the owner token returned.
    fn forget(self) -> String
    where
        Self: Sized;
}

/// A boxed future of a [`DynGuard`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// [`Guard`] as a trait object, for code that chooses the kind of hold at
/// run time (a binding's one hold class, a command's `--permits` or not):
/// `Box<dyn DynGuard>`. Every `Guard` is one (a blanket impl); its
/// futures are boxed, and `release` and `forget` take the box. What only
/// one kind has (a leadership's `proclaim`, several locks' `names`) is
/// reached through [`as_any`](DynGuard::as_any).
///
/// ```no_run
/// # async fn demo(client: latchkey::Client, permits: Option<u64>) -> latchkey::Result<()> {
/// use std::time::Duration;
/// use latchkey::DynGuard;
/// let ttl = Duration::from_secs(10);
/// let hold: Box<dyn DynGuard> = match permits {
///     Some(n) => Box::new(client.semaphore("jobs", n, ttl)?.acquire().await?),
///     None => Box::new(client.lock("jobs", ttl)?.acquire().await?),
/// };
/// println!("holding until {:?}", hold.deadline());
/// hold.release().await?;
/// # Ok(()) }
/// ```
pub trait DynGuard: Send + Sync {
    /// See [`Guard::name`].
    fn name(&self) -> &[u8];
    /// See [`Guard::token`].
    fn token(&self) -> &str;
    /// See [`Guard::ttl`].
    fn ttl(&self) -> Duration;
    /// See [`Guard::deadline`].
    fn deadline(&self) -> Instant;
    /// See [`Guard::is_held`].
    fn is_held(&self) -> bool;
    /// See [`Guard::lost`].
    fn lost(&self) -> BoxFuture<'_, ()>;
    /// See [`Guard::lost_signal`].
    fn lost_signal(&self) -> LostSignal;
    /// See [`Guard::lost_reason`].
    fn lost_reason(&self) -> Option<LostReason>;
    /// See [`Guard::release_requested`].
    fn release_requested(&self) -> BoxFuture<'_, Result<()>>;
    /// See [`Guard::extend`].
    fn extend(&self, ttl: Duration) -> BoxFuture<'_, Result<Ownership>>;
    /// See [`Guard::confirm`].
    fn confirm(&self) -> BoxFuture<'_, Result<Ownership>>;
    /// See [`Guard::fencing_token`].
    fn fencing_token(&self) -> BoxFuture<'_, Result<u64>>;
    /// See [`Guard::issued_fencing_token`].
    fn issued_fencing_token(&self) -> Option<u64>;
    /// See [`Guard::fencing_tokens`].
    fn fencing_tokens(&self) -> BoxFuture<'_, Result<Vec<u64>>>;
    /// See [`Guard::issued_fencing_tokens`].
    fn issued_fencing_tokens(&self) -> Option<Vec<u64>>;
    /// See [`Guard::release`].
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<Ownership>>;
    /// See [`Guard::forget`].
    fn forget(self: Box<Self>) -> String;
    /// The guard as itself, for the calls of its own kind:
    /// `hold.as_any().downcast_ref::<latchkey::Leadership>()`.
    fn as_any(&self) -> &dyn Any;
}

impl<G: Guard + 'static> DynGuard for G {
    fn name(&self) -> &[u8] {
        Guard::name(self)
    }
    fn token(&self) -> &str {
        Guard::token(self)
    }
    fn ttl(&self) -> Duration {
        Guard::ttl(self)
    }
    fn deadline(&self) -> Instant {
        Guard::deadline(self)
    }
    fn is_held(&self) -> bool {
        Guard::is_held(self)
    }
    fn lost(&self) -> BoxFuture<'_, ()> {
        Box::pin(Guard::lost(self))
    }
    fn lost_signal(&self) -> LostSignal {
        Guard::lost_signal(self)
    }
    fn lost_reason(&self) -> Option<LostReason> {
        Guard::lost_reason(self)
    }
    fn release_requested(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(Guard::release_requested(self))
    }
    fn extend(&self, ttl: Duration) -> BoxFuture<'_, Result<Ownership>> {
        Box::pin(Guard::extend(self, ttl))
    }
    fn confirm(&self) -> BoxFuture<'_, Result<Ownership>> {
        Box::pin(Guard::confirm(self))
    }
    fn fencing_token(&self) -> BoxFuture<'_, Result<u64>> {
        Box::pin(Guard::fencing_token(self))
    }
    fn issued_fencing_token(&self) -> Option<u64> {
        Guard::issued_fencing_token(self)
    }
    fn fencing_tokens(&self) -> BoxFuture<'_, Result<Vec<u64>>> {
        Box::pin(Guard::fencing_tokens(self))
    }
    fn issued_fencing_tokens(&self) -> Option<Vec<u64>> {
        Guard::issued_fencing_tokens(self)
    }
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<Ownership>> {
        Box::pin(Guard::release(*self))
    }
    fn forget(self: Box<Self>) -> String {
        Guard::forget(*self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

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
    /// Issues the fencing token with every acquisition.
    fn with_fencing(self) -> Self;
    /// Makes every waiting acquisition ask the holders to let go.
    fn with_asking(self) -> Self;
}

pub(crate) mod sealed {
    /// Only latchkey's guards are [`Guard`](super::Guard)s.
    pub trait Sealed {}
}
