//! The builder methods every primitive whose holds are leases shares
//! (layer 4): one definition of `with_watchdog`, `with_renewal_every`,
//! `with_fencing`, `with_asking`, `name` and `ttl`, so that a semaphore and a read-write
//! lock cannot drift apart from each other (a [`Lock`](crate::Lock) has its
//! own, with its lazy fencing; an election always renews and its term is
//! its fencing token).

/// Expands, inside `impl X`, to the lease options of `X`, whose `inner` is
/// an `Arc` of a spec with `name` and `lease: LeaseOptions` fields. `$what`: the primitive, and `$hold`: its hold, as
/// the docs say them; `$fenced`: which holds a fencing token comes with.
macro_rules! lease_options {
    ($what:literal, $hold:literal, $fenced:literal) => {
        #[doc = concat!("Renews every ", $hold, " of this ", $what, " in the background every")]
        #[doc = "`ttl / 3` while it is held; see [`with_renewal_every`](Self::with_renewal_every)."]
        pub fn with_watchdog(mut self) -> Self {
            let every = self.inner.lease.ttl / 3;
            std::sync::Arc::make_mut(&mut self.inner).lease.renew_every = Some(every);
            self
        }

        crate::primitives::builder::lease_limits! {
            $what, $hold,
            #[doc = concat!("Renews every ", $hold, " of this ", $what, " in the background every")]
            /// `every` while it is held, as
            /// [`Lock::with_renewal_every`](crate::Lock::with_renewal_every): when a
            /// renewal finds the hold gone, or renewals keep failing until its
            /// deadline, the hold's `lost()` fires.
            ///
            /// Fails with [`Error::InvalidInput`](crate::Error::InvalidInput) unless
            /// `every` is positive and shorter than the TTL minus the drift
            /// allowance.
        }

        #[doc = concat!("Issues a fencing token with ", $fenced, ", in the same round trip.")]
        pub fn with_fencing(mut self) -> Self {
            std::sync::Arc::make_mut(&mut self.inner).lease.fenced = true;
            self
        }

        #[doc = concat!("Makes every waiting acquisition of this ", $what, " ask the holders to let")]
        /// go, as [`Lock::with_asking`](crate::Lock::with_asking) does: the
        /// request of [`Client::request_release`](crate::Client::request_release)
        /// (every holder awaiting its guard's `release_requested()` hears
        /// it, whoever it is), sent at the first attempt that finds no room,
        /// and again after each release it lost the race for (the holders
        /// changed); never on a first try, never on every wake-up.
        pub fn with_asking(mut self) -> Self {
            std::sync::Arc::make_mut(&mut self.inner).lease.asking = true;
            self
        }

        #[doc = concat!("The ", $what, "'s name.")]
        pub fn name(&self) -> &[u8] {
            &self.inner.name
        }

        #[doc = concat!("The TTL of every ", $hold, ".")]
        pub fn ttl(&self) -> std::time::Duration {
            self.inner.lease.ttl
        }
    };
}

/// Expands, inside `impl X` (whose `inner` is an `Arc` of a spec with a
/// `lease: LeaseOptions` field), to `with_renewal_every` (documented by the
/// doc comments given: each primitive says what renewing means for it),
/// `with_max_hold` and `with_stop_margin`: every primitive whose holds are
/// leases has them (a lock, an election, and through [`lease_options!`] a
/// semaphore, a read-write lock and a multi lock).
macro_rules! lease_limits {
    ($what:literal, $hold:literal, $(#[$doc:meta])*) => {
        $(#[$doc])*
        pub fn with_renewal_every(mut self, every: std::time::Duration) -> crate::Result<Self> {
            let every = crate::vocab::names::check_renewal_every(every, self.inner.lease.ttl)?;
            std::sync::Arc::make_mut(&mut self.inner).lease.renew_every = Some(every);
            Ok(self)
        }

        #[doc = concat!("Caps every ", $hold, " of this ", $what, " at `max_hold` from its")]
        /// acquisition, even with the watchdog on: renewals (and
        /// `extend`) never take it past the cap, and `lost()` fires the
        /// stop margin before the cap (with
        /// [`LostReason::MaxHold`](crate::LostReason::MaxHold)), so a
        /// holder that stops when told is gone by the cap; one that is
        /// alive but stuck loses it within `max(max_hold, ttl)`. An `extend`
        /// that would take the hold past the cap fails with
        /// [`Error::MaxHoldReached`](crate::Error::MaxHoldReached), changing
        /// nothing.
        /// Fails with [`Error::InvalidInput`](crate::Error::InvalidInput)
        /// below [`MIN_TTL`](crate::limits::MIN_TTL).
        pub fn with_max_hold(mut self, max_hold: std::time::Duration) -> crate::Result<Self> {
            let max_hold = crate::vocab::names::check_max_hold(max_hold)?;
            std::sync::Arc::make_mut(&mut self.inner).lease.max_hold = Some(max_hold);
            Ok(self)
        }

        #[doc = concat!("Keeps every ", $hold, " of this ", $what, " for at least `least` from its")]
        /// acquisition: a release (or a drop) before then extends it to
        /// the time left and gives it up, as `forget` does, so nobody else
        /// can take it until then (ShedLock's `lockAtLeastFor`: a job that
        /// finished in 50 ms on one machine is not run again by another
        /// whose timer fired a second later). The release says what the
        /// extension found (`Owned`: kept until then). Fails with
        /// [`Error::InvalidTtl`](crate::Error::InvalidTtl) outside
        /// [`MIN_TTL`](crate::limits::MIN_TTL)..=[`MAX_TTL`](crate::limits::MAX_TTL).
        pub fn with_hold_at_least(mut self, least: std::time::Duration) -> crate::Result<Self> {
            crate::vocab::names::check_ttl(least)?;
            std::sync::Arc::make_mut(&mut self.inner).lease.hold_at_least = Some(least);
            Ok(self)
        }

        #[doc = concat!("Makes `lost()` of every ", $hold, " of this ", $what, " fire `margin` before")]
        /// the hold's deadline (or its cap, `with_max_hold`) when nothing
        /// moved it: a holder that stops within `margin` of hearing it is
        /// gone before anyone else can take the hold. Default: a fifth of
        /// the TTL. `is_held()` is false from then on too.
        ///
        /// The watchdog's renewals come often enough for the margin (every
        /// `ttl / 3`, or sooner when `ttl - margin` asks for it), and the
        /// margin is never more than half the cap: a hold capped at 300 ms
        /// gets at most 150 ms. Fails with
        /// [`Error::InvalidInput`](crate::Error::InvalidInput) above half
        /// the TTL.
        pub fn with_stop_margin(mut self, margin: std::time::Duration) -> crate::Result<Self> {
            let margin =
                crate::primitives::lease::options::check_stop_margin(margin, self.inner.lease.ttl)?;
            std::sync::Arc::make_mut(&mut self.inner).lease.stop_margin = Some(margin);
            Ok(self)
        }
    };
}

/// `impl HoldOptions for $t`, over `$t`'s own builder methods (a lock's,
/// and those `lease_options!` gives a semaphore, a read-write lock and a
/// multi lock).
macro_rules! hold_options_impl {
    ($($t:ty),*) => {$(
        impl crate::primitives::guard::sealed::Sealed for $t {}

        impl crate::HoldOptions for $t {
            fn name(&self) -> &[u8] {
                <$t>::name(self)
            }
            fn ttl(&self) -> std::time::Duration {
                <$t>::ttl(self)
            }
            fn with_watchdog(self) -> Self {
                <$t>::with_watchdog(self)
            }
            fn with_renewal_every(self, every: std::time::Duration) -> crate::Result<Self> {
                <$t>::with_renewal_every(self, every)
            }
            fn with_max_hold(self, max_hold: std::time::Duration) -> crate::Result<Self> {
                <$t>::with_max_hold(self, max_hold)
            }
            fn with_stop_margin(self, margin: std::time::Duration) -> crate::Result<Self> {
                <$t>::with_stop_margin(self, margin)
            }
            fn with_hold_at_least(self, least: std::time::Duration) -> crate::Result<Self> {
                <$t>::with_hold_at_least(self, least)
            }
            fn with_fencing(self) -> Self {
                <$t>::with_fencing(self)
            }
            fn with_asking(self) -> Self {
                <$t>::with_asking(self)
            }
        }
    )*};
}

pub(crate) use hold_options_impl;
pub(crate) use lease_limits;
pub(crate) use lease_options;
