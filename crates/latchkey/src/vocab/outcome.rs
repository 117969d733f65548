//! The outcome vocabulary every layer speaks: what an owner-only operation
//! found, and what one acquisition attempt got.

use std::time::{Duration, Instant};

/// What an extension found, and the new deadline when it renewed the hold.
pub(crate) type Renewal = crate::vocab::error::Result<(Ownership, Instant)>;

/// The fencing token issued for a hold, or (`Err`) what was found in its
/// place when the hold is no longer ours.
pub(crate) type Issued = crate::vocab::error::Result<std::result::Result<u64, Ownership>>;

/// What an owner-only operation ([`LockGuard::release`](crate::LockGuard::release),
/// [`LockGuard::extend`](crate::LockGuard::extend), and their by-token
/// forms) found. Losing a lock is an outcome, not an error.
///
/// For a [`Redlock`](crate::Redlock): `Owned` when a majority confirmed;
/// otherwise `HeldByOther` if any instance holds someone else's key, else
/// `Expired`.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// We held the lock, and the operation was done: released (the lock is
    /// free now) or extended (its TTL was reset).
    Owned,
    /// The lock had expired: nothing was changed.
    Expired,
    /// The lock had expired and someone else holds it now: nothing was changed.
    HeldByOther,
}

/// Why a hold ended without its holder releasing it: what a guard's
/// `lost_reason()` says once its `lost()` has fired (see
/// [`Guard::lost_reason`](crate::Guard::lost_reason)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// An operator revoked it ([`Client::revoke`](crate::Client::revoke),
    /// `latchkey revoke`): the holder heard it and found the hold gone.
    Revoked,
    /// It reached its cap (`with_max_hold`): it is not renewed past it,
    /// and `lost` fired the stop margin before the cap.
    MaxHold,
    /// Its deadline came (less than the stop margin left) with nothing
    /// renewing it: a hold without a watchdog, not extended in time.
    Expired,
    /// Redis no longer had it when the holder checked: its key expired
    /// there (the holder was paused past its TTL), was deleted, or was lost
    /// by a restart without persistence or a failover to a replica that
    /// had not received it.
    Gone,
    /// Someone else holds it now.
    TakenOver,
    /// Redis did not answer the renewals in time: ownership could not be
    /// proven up to the stop margin.
    Unreachable,
    /// Its client was closed ([`Client::close`](crate::Client::close)),
    /// which gave it back.
    Closed,
}

impl LostReason {
    /// A short phrase, as the CLI prints it after "lost …: ".
    pub fn describe(self) -> &'static str {
        match self {
            LostReason::Revoked => "revoked by an operator",
            LostReason::MaxHold => "it reached its max hold",
            LostReason::Expired => "its TTL ran out without a renewal",
            LostReason::Gone => {
                "it was gone from Redis (expired there, deleted, or lost by a restart or failover)"
            }
            LostReason::TakenOver => "someone else holds it now",
            LostReason::Unreachable => "Redis did not answer the renewals in time",
            LostReason::Closed => "its client was closed",
        }
    }

    /// A stable lower-case name (`revoked`, `max-hold`, `expired`, `gone`,
    /// `taken-over`, `unreachable`, `closed`): for metrics, JSON and bindings.
    pub fn as_str(self) -> &'static str {
        match self {
            LostReason::Revoked => "revoked",
            LostReason::MaxHold => "max-hold",
            LostReason::Expired => "expired",
            LostReason::Gone => "gone",
            LostReason::TakenOver => "taken-over",
            LostReason::Unreachable => "unreachable",
            LostReason::Closed => "closed",
        }
    }

    /// What a check that found the hold not ours means: `revoked` when a
    /// revocation was heard first.
    pub(crate) fn from_check(found: Ownership, revoked: bool) -> LostReason {
        match (revoked, found) {
            (true, _) => LostReason::Revoked,
            (false, Ownership::HeldByOther) => LostReason::TakenOver,
            (false, _) => LostReason::Gone,
        }
    }
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

/// The result of one acquisition attempt.
pub(crate) enum Attempt {
    Acquired {
        /// Issued with the acquisition (a lock made `with_fencing`), or not yet.
        fencing_token: Option<u64>,
        /// Monotonic instant until which we may assume we hold the lock.
        valid_until: Instant,
    },
    Busy {
        /// The holder's remaining TTL, when known.
        retry_in: Option<Duration>,
        /// Whether the holder's release will publish a wake-up: a latchkey
        /// holder whose token a waiter marked. False for a holder of
        /// another library (redis-py, node-redlock, redsync: their releases
        /// publish nothing), for a mark that could not be set (no APPEND
        /// permission), and when not asked: a waiter then polls.
        announced: bool,
        /// A fingerprint of the holder (the same for one hold, another for
        /// the next), when asked ([`AttemptMode::holder`]) and known.
        holder: Option<u64>,
        /// The holder keeps the lock while idle (its token carries the
        /// [caching mark](crate::vocab::protocol::CACHING_MARK)), as a
        /// first try saw (its `SET … GET`, or the acquire script's busy
        /// reply): a waiter tells it at once that the lock is wanted
        /// (`primitives/lock/wait.rs`). False where unknown.
        kept_idle: bool,
    },
}

/// How one attempt asks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttemptMode {
    /// Issue the fencing token in the same round trip (the acquire script).
    pub(crate) fenced: bool,
    /// The caller waits: when busy, learn the holder's TTL (a waiter sleeps
    /// until then).
    pub(crate) ask_ttl: bool,
    /// With `ask_ttl`: also mark the holder's token so that its release
    /// publishes the wake-up (a release nobody marked publishes nothing).
    /// Not when the holder is a guard of this client, whose release wakes
    /// the waiter without Redis (see `primitives/lock/wait.rs`).
    pub(crate) mark: bool,
    /// With `mark`: also register this process among the lock's waiting
    /// processes, so that a release wakes it alone (one server: its
    /// waiters listen on the lock's wake channel there; a Redlock's listen
    /// on every instance's release channel, and are woken by broadcast).
    pub(crate) register: bool,
    /// With `ask_ttl`: also name the holder in a busy reply (a fingerprint
    /// of its token), for a waiter that asks each holder to let go once.
    pub(crate) holder: bool,
}
