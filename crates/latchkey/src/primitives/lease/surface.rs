//! The one public surface of every hold: `lease_surface!(Guard, ...)` gives
//! a guard that keeps its [`Lease`](super::Lease) in a `lease` field the
//! same methods, with the same docs, as every other guard (`deadline`,
//! `is_held`, `lost`, `lost_signal`, `fencing_token`, `extend`, `release`,
//! `forget`, ...), and implements [`Guard`](crate::Guard) with them: the
//! methods are the guard's own, so users call them without importing the
//! trait, and generic code takes any `G: Guard`.

/// `lease_surface!(Guard, "the lock", "lock")`: `$hold` says what the guard
/// holds (for the docs), `$of` what the name is the name of;
/// `lease_surface!(Guard, ..., without_fencing)` leaves out
/// `fencing_token` and `issued_fencing_token` (a guard with one token per
/// lock has its own, which the `Guard` impl calls).
macro_rules! lease_surface {
    ($guard:ident, $hold:literal, $of:literal) => {
        lease_surface!(@surface $guard, $hold, $of);
        lease_surface!(@guard $guard);

        impl $guard {
            #[doc = concat!("The fencing token of this hold of ", $hold, ": greater than the token of")]
            /// every earlier hold, smaller than that of every later one. Pass
            /// it with every write to the resource, so that it can reject a
            /// stale holder's writes (see [`Client::fenced`](crate::Client::fenced)).
            ///
            /// Ready at once when it came with the hold (made `with_fencing`;
            /// a leadership's is its term); otherwise issued on the first call
            /// by one round trip (a script that checks that the hold is still
            /// ours and bumps the fencing counter), and the same on every
            /// later call. Extensions keep it. Fails with
            /// [`Error::NotHeld`](crate::Error::NotHeld) when the hold is no
            /// longer ours (and marks the guard lost): a token issued then
            /// could outrank the new holder's; a reader's hold of a read-write
            /// lock has none ([`Error::Unsupported`](crate::Error::Unsupported)).
            ///
            /// # Cancel safety
            /// Cancel safe. Dropped after the request was sent, the counter
            /// may have moved on without us keeping the token; the next call
            /// issues another one, which is just as good. The hold stays
            /// held either way.
            pub async fn fencing_token(&self) -> $crate::Result<u64> {
                self.lease.fencing_token().await
            }

            /// The fencing token, if it was issued already (at acquisition,
            /// or by an earlier `fencing_token` call). Asks nobody.
            pub fn issued_fencing_token(&self) -> Option<u64> {
                self.lease.issued_fencing_token()
            }
        }
    };
    // A hold of several locks, with a fencing token each (`MultiGuard`):
    // everything but the one token.
    ($guard:ident, $hold:literal, $of:literal, without_fencing) => {
        lease_surface!(@surface $guard, $hold, $of);
        lease_surface!(@guard $guard,
            fn fencing_tokens(&self) -> impl std::future::Future<Output = $crate::Result<Vec<u64>>> + Send {
                $guard::fencing_tokens(self)
            }
            fn issued_fencing_tokens(&self) -> Option<Vec<u64>> {
                $guard::issued_fencing_tokens(self)
            }
        );
    };
    (@surface $guard:ident, $hold:literal, $of:literal) => {
        impl $guard {
            #[doc = concat!("The ", $of, "'s name.")]
            pub fn name(&self) -> &[u8] {
                self.lease.name()
            }

            #[doc = concat!("Our owner token: what Redis keeps for ", $hold, " while it is ours.")]
            pub fn token(&self) -> &str {
                self.lease.token()
            }

            #[doc = concat!("Until when we may assume we hold ", $hold, " (monotonic clock): computed")]
            /// from when the acquiring (or last successful extending) request
            /// was *sent*, minus a drift allowance (`ttl / 100 + 2 ms`).
            pub fn deadline(&self) -> std::time::Instant {
                self.lease.deadline()
            }

            /// True while ownership is not known to be lost and the stop
            /// margin before the deadline (or the cap) has not come. Asks
            /// nobody; a `true` is a statement about the past request, not a
            /// promise: use fencing tokens where that matters.
            pub fn is_held(&self) -> bool {
                self.lease.is_held()
            }

            #[doc = concat!("Completes when ", $hold, " can no longer be proven ours: at once when a")]
            /// renewal, an extension, or a check finds it gone or taken (the
            /// hold checks itself when it hears a revocation or a foreign
            /// release on its channel, and when the connection comes back
            /// after a drop), otherwise the stop margin before its deadline
            /// (which the watchdog keeps pushing out while renewals succeed)
            /// or its cap. Stop working on the protected resource when it
            /// completes; [`lost_reason`](Self::lost_reason) says why.
            ///
            /// # Cancel safety
            /// Cancel safe; it can be polled again, or from several places.
            pub async fn lost(&self) {
                self.lease.lost().await
            }

            #[doc = concat!("A handle on the [`lost`](", stringify!($guard), "::lost) signal that outlives")]
            /// the borrow of the guard: clone it into the tasks that must stop
            /// when the hold is lost. Needs a tokio runtime: without a
            /// watchdog, a small task is started to fire it at the deadline.
            pub fn lost_signal(&self) -> $crate::LostSignal {
                self.lease.lost_signal()
            }

            #[doc = concat!("Completes when another process asks for ", $hold, ": a call of")]
            /// [`Client::request_release`](crate::Client::request_release)
            /// (`latchkey request-release NAME`) on this name. Cooperative:
            /// nothing is taken away; release when it suits you (or ignore
            /// it). Costs nothing until polled: it subscribes to the
            /// primitive's channel then (one per client, shared), so a
            /// request made before the first poll is not seen (pub/sub
            /// keeps nothing). Fails only when the subscription does.
            ///
            /// # Cancel safety
            /// Cancel safe: dropping it unsubscribes; poll it again to listen again.
            pub async fn release_requested(&self) -> $crate::Result<()> {
                self.lease.release_requested().await
            }

            #[doc = concat!("Resets the TTL of ", $hold, " to `ttl` from now, if it is still ours;")]
            /// otherwise marks the guard lost. One round trip. With a
            /// watchdog, its later renewals keep the hold at least until
            /// `ttl` from now (a `ttl` longer than the hold's is not undone
            /// by the next renewal). A `ttl` that would take the hold past
            /// its max hold is refused with
            /// [`Error::MaxHoldReached`](crate::Error::MaxHoldReached), and
            /// nothing changes.
            ///
            /// # Cancel safety
            /// Cancel safe. Dropped after the request was sent, Redis may have
            /// reset the TTL, but the guard's deadline stays where it was: the
            /// guard never assumes more than a reply proved, and the watchdog
            /// (if any) goes on.
            pub async fn extend(&self, ttl: std::time::Duration) -> $crate::Result<$crate::Ownership> {
                self.lease.extend(ttl).await
            }

            #[doc = concat!("Proves ", $hold, " still ours by one round trip that leaves its expiry")]
            /// where it is; otherwise marks the guard lost (a hold about to
            /// end, with less than [`MIN_TTL`](crate::limits::MIN_TTL)
            /// left, is `Expired` without a round trip). What a supervisor
            /// asks before it starts work on a hold it may have waited on.
            ///
            /// # Cancel safety
            /// Cancel safe: nothing changes but, on a reply, what the guard knows.
            pub async fn confirm(&self) -> $crate::Result<$crate::Ownership> {
                self.lease.confirm().await
            }

            #[doc = concat!("Releases ", $hold, " if it is still ours (owner-only), wakes the")]
            /// waiters, and stops the watchdog. One round trip.
            ///
            /// `Ok(Ownership::Owned)`: it was ours until now and is free;
            /// `Expired` or `HeldByOther`: it was no longer ours (nothing was
            /// changed). A transient error (Redis restarting or failing over,
            /// no answer in time) is retried by the one failure policy while
            /// the deadline has not passed, so a release that lands in an
            /// outage still frees it when Redis is back; past the deadline it
            /// is tried once more in the background, and then it ends by
            /// itself at its TTL. (A retry after a lost reply may find it
            /// freed by the first request already: then it says `Expired`.)
            ///
            /// # Cancel safety
            /// Cancel safe: dropped before the reply was read, the release is
            /// finished in the background, as for a guard dropped without
            /// release; [`Client::flush`](crate::Client::flush) waits for it.
            pub async fn release(mut self) -> $crate::Result<$crate::Ownership> {
                self.lease.release().await
            }

            #[doc = concat!("Gives up the guard without releasing ", $hold, ": the watchdog stops,")]
            /// nothing is released in the background, and the hold ends at
            /// its TTL, or by a release with the returned owner token (the
            /// CLI's `latchkey acquire` keeps a lock this way after it exits).
            pub fn forget(self) -> String {
                self.lease.forget()
            }

            #[doc = concat!("How long an acquisition or a renewal of ", $hold, " holds for.")]
            pub fn ttl(&self) -> std::time::Duration {
                self.lease.ttl()
            }

            #[doc = concat!("Why ", $hold, " was lost, once [`lost`](", stringify!($guard), "::lost) fired (or its")]
            /// stop margin passed): revoked, its max hold, its TTL, gone
            /// from Redis, taken over, Redis unreachable. `None` while held.
            pub fn lost_reason(&self) -> Option<$crate::LostReason> {
                self.lease.lost_reason()
            }
        }

    };
    // The `Guard` impl over the methods above; `$more`: what the guard
    // answers its own way (the tokens of several locks).
    (@guard $guard:ident $(, $($more:tt)*)?) => {
        impl $crate::primitives::guard::sealed::Sealed for $guard {}

        impl $crate::Guard for $guard {
            $($($more)*)?
            fn name(&self) -> &[u8] {
                $guard::name(self)
            }
            fn token(&self) -> &str {
                $guard::token(self)
            }
            fn ttl(&self) -> std::time::Duration {
                $guard::ttl(self)
            }
            fn deadline(&self) -> std::time::Instant {
                $guard::deadline(self)
            }
            fn is_held(&self) -> bool {
                $guard::is_held(self)
            }
            fn lost(&self) -> impl std::future::Future<Output = ()> + Send {
                $guard::lost(self)
            }
            fn lost_signal(&self) -> $crate::LostSignal {
                $guard::lost_signal(self)
            }
            fn lost_reason(&self) -> Option<$crate::LostReason> {
                $guard::lost_reason(self)
            }
            fn release_requested(&self) -> impl std::future::Future<Output = $crate::Result<()>> + Send {
                $guard::release_requested(self)
            }
            fn extend(&self, ttl: std::time::Duration) -> impl std::future::Future<Output = $crate::Result<$crate::Ownership>> + Send {
                $guard::extend(self, ttl)
            }
            fn confirm(&self) -> impl std::future::Future<Output = $crate::Result<$crate::Ownership>> + Send {
                $guard::confirm(self)
            }
            fn fencing_token(&self) -> impl std::future::Future<Output = $crate::Result<u64>> + Send {
                $guard::fencing_token(self)
            }
            fn issued_fencing_token(&self) -> Option<u64> {
                $guard::issued_fencing_token(self)
            }
            fn release(self) -> impl std::future::Future<Output = $crate::Result<$crate::Ownership>> + Send {
                $guard::release(self)
            }
            fn forget(self) -> String {
                $guard::forget(self)
            }
        }
    };
}
