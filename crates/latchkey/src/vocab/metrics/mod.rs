//! What latchkey counts and times, through the `metrics` crate's facade.
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! use latchkey::MetricsLabels;
//! // Install any `metrics` recorder first (e.g. metrics-exporter-prometheus),
//! // then give the metrics their descriptions and units:
//! latchkey::metrics::describe();
//!
//! let client = latchkey::Client::builder("redis://127.0.0.1:6380/")
//!     // Every primitive metric of this client gets `lock="billing"`:
//!     .metrics_labels(MetricsLabels::Static("billing".into()))
//!     .connect()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! The library depends on the facade only. Each primitive builds the keys of its
//! metrics once (unlabelled ones of a kind share one set), so recording is a lookup
//! of the current recorder and a call to it; without an installed recorder
//! that is the facade's no-op recorder, a few nanoseconds. The names, types and labels below are a public interface
//! (`docs/monitoring.md` explains each and has alert rules and a dashboard).
//!
//! # Labels
//! Every primitive's metrics carry a `kind` label: `lock`, `fair-lock`,
//! `semaphore`, `rwlock`, `latch`, `barrier` or `election` (the strings of
//! [`Kind::as_str`](crate::Kind::as_str), as the exporter's series). The
//! same names serve every primitive: an acquisition is a lock's or a
//! semaphore's acquire, a read-write lock's read or write, a latch's wait,
//! a barrier's arrive-and-wait, or a campaign; a hold lasts until the
//! release (a leader's: until its resign). A sum without `kind` adds them
//! all up.
//!
//! They carry a `lock` label too, as [`MetricsLabels`] says: none by
//! default, one fixed value, or the primitive's name. The name is opt-in because
//! every distinct name is a new time series in the monitoring system: a
//! lock per customer or per job id would flood it. The labels are computed
//! once per primitive ([`Lock`](crate::Lock), [`Semaphore`](crate::Semaphore), ...),
//! not per call. Client-wide metrics (signals, Redis errors) carry neither;
//! their own `kind` label says which signal or error.
//!
//! # Histograms
//! Durations are recorded in seconds. A Prometheus recorder renders a
//! histogram as a summary unless given buckets: [`SECONDS_BUCKETS`] suits
//! every `*_seconds` metric here.

pub(crate) mod keys;

use ::metrics::{counter, describe_counter, describe_histogram, Unit};

use crate::vocab::error::Error;

pub(crate) use crate::vocab::metrics::keys::{
    acquire_outcome, count_down, handoff, hold_time, lock_lost, release_outcome, renewal, revoked,
    CacheKeys, GiveBack, LockLabel, Outcome,
};

/// Counter, labels `kind`, `outcome` = `ok` | `busy` | `timeout` | `error`: finished
/// acquire calls of every kind (a latch's wait, a barrier's
/// arrive-and-wait and a campaign included). `busy` is a
/// [`try_acquire`](crate::Lock::try_acquire) (or `try_*`) that
/// found the primitive held; `timeout` a waiting call whose deadline passed
/// ([`Error::WaitTimedOut`], a latch's `Ok(false)`, a barrier's `Ok(None)`);
/// `error` any other error. A waiting call that is cancelled (its future
/// dropped) is not counted. For an election, `ok` counts the terms won.
pub const ACQUISITIONS: &str = "latchkey_acquisitions_total";

/// Histogram (seconds), label `kind`: from the acquire call to the primitive held
/// (a latch open, a barrier released, a leader elected), for every
/// successful acquisition (a `try_acquire` that got the lock: one round trip).
pub const ACQUIRE_WAIT: &str = "latchkey_acquire_wait_seconds";

/// Histogram (seconds), label `kind`: from the lock (a permit, a read or
/// write hold, a leadership) held to the guard released, resigned or
/// dropped (measured when `release` is called or the guard is dropped,
/// before the round trip), whatever the release finds.
pub const HOLD: &str = "latchkey_hold_seconds";

/// Histogram (seconds), label `kind` (`lock`, `fair-lock`): for a waiter woken by a release notification (a
/// release message, or a release by its own client), from the wake-up
/// received to the lock held: the waiter's share of a handoff. Not measured
/// for the waiter that loses the race (it waits again) nor for one woken by
/// the holder's TTL running out. The share before it (release to message
/// delivered) needs the two processes' clocks; see `docs/monitoring.md`.
pub const HANDOFF: &str = "latchkey_handoff_seconds";

/// Counter, labels `kind`, `outcome` = `ok` | `failed`: lease renewals of
/// every held lease (lock, permit, read-write hold, leadership), by the
/// watchdog or [`LockGuard::extend`](crate::LockGuard::extend). `failed`
/// covers errors, timeouts and renewals that found the lock no longer ours.
pub const RENEWALS: &str = "latchkey_renewals_total";

/// Counter, label `kind`: guards (permits, holds, leaderships) that learned they lost their lock (a renewal or extension
/// found it gone or taken, or the lease ran out first). Counted once per
/// guard, when its [`lost`](crate::LockGuard::lost) signal fires.
pub const LOCKS_LOST: &str = "latchkey_locks_lost_total";

/// Counter, labels `kind`, `outcome` = `released` | `expired` | `held_by_other` |
/// `error`: releases of held locks (permits, holds; a leader's resign),
/// explicit or by a dropped guard.
/// `expired` and `held_by_other` are releases that found the lock already
/// gone (see [`Ownership`](crate::Ownership)).
pub const RELEASES: &str = "latchkey_releases_total";

/// Counter, label `kind`: holds ended by an operator's revocation
/// ([`Client::revoke`](crate::Client::revoke), `latchkey revoke`): a lock,
/// a leadership, each permit of a semaphore, each reader and the writer of a
/// read-write lock. The holders count their loss in [`LOCKS_LOST`] when
/// they notice it; this is the operator's side, for the audit.
pub const REVOCATIONS: &str = "latchkey_revocations_total";

/// Counter, labels `kind`, `from` = `local` | `redis`: acquisitions of a
/// lock [kept while idle](crate::Lock::with_caching): `local`, the hold
/// kept by this process, no round trip; `redis`, a new hold from Redis.
pub const CACHED_ACQUISITIONS: &str = "latchkey_cached_acquisitions_total";

/// Counter, labels `kind`, `reason` = `wanted` | `idle` | `flush` | `lost`:
/// holds kept while idle that were given back to Redis: another process
/// wanted the lock (or asked for it), the idle time ran out,
/// [`Client::flush`](crate::Client::flush) or the last clone of the lock
/// went, or the hold was lost.
pub const CACHE_GIVE_BACKS: &str = "latchkey_cache_give_backs_total";

/// Counter, labels `kind` = `latch`, `outcome` = `counted` | `opened` |
/// `not_found` | `already_open` | `error`: a latch's
/// [`count_down`](crate::Latch::count_down) calls. `opened`: the one that
/// reached 0; `already_open`: [`Error::CountedBelowZero`].
pub const COUNT_DOWNS: &str = "latchkey_count_downs_total";

/// Counter, label `kind` = `broadcast` | `unicast`: signals sent
/// ([`Client::signal`](crate::Client::signal); a
/// [`signal_one`](crate::Client::signal_one) only when a waiter got it).
pub const SIGNALS_SENT: &str = "latchkey_signals_sent_total";

/// Counter, label `kind` = `broadcast` | `unicast`: signals a
/// [`Listener`](crate::Listener) delivered (copies from several servers
/// count once).
pub const SIGNALS_RECEIVED: &str = "latchkey_signals_received_total";

/// Counter, no label: round trips that carried watchdog renewals. On one
/// server (and each Redlock instance) a round trip is one pipeline of the
/// renewals due together, so it grows with the ticks of the watchdogs, not
/// with the holds; on a Redis Cluster each renewal is one.
pub const RENEWAL_ROUND_TRIPS: &str = "latchkey_renewal_round_trips_total";

/// Counter, label `kind` = `unreachable` | `timeout` | `auth` |
/// `no_permission` | `tls` | `wrong_type` | `other`: failed Redis commands on the
/// command connection (every instance of a Redlock counts its own).
pub const REDIS_ERRORS: &str = "latchkey_redis_errors_total";

/// The label key of a primitive's name or fixed value (see [`MetricsLabels`]).
pub const LOCK_LABEL: &str = "lock";

/// The label key of the primitive's kind on every primitive's metric.
pub const KIND_LABEL: &str = "kind";

/// Histogram buckets (seconds) for every `*_seconds` metric: 1 ms to 10 min.
/// Waits are round trips (ms) when the lock is free and up to a holder's
/// lifetime when not; holds span milliseconds to many minutes.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 600.0,
];

/// Gives every latchkey metric its description and unit in the installed
/// recorder. Call once after installing it; harmless to call again.
pub fn describe() {
    describe_counter!(
        ACQUISITIONS,
        "Finished acquire calls of every kind of primitive, by outcome (ok, busy, timeout, error)."
    );
    describe_histogram!(
        ACQUIRE_WAIT,
        Unit::Seconds,
        "From an acquire call to the primitive held (a latch open, a barrier released, a leader elected)."
    );
    describe_histogram!(
        HOLD,
        Unit::Seconds,
        "From a lock, permit, hold or leadership held to its guard released or dropped."
    );
    describe_histogram!(
        HANDOFF,
        Unit::Seconds,
        "For a waiter woken by a release notification: wake-up to lock held."
    );
    describe_counter!(
        RENEWALS,
        "Lease renewals (watchdog or extend), by outcome (ok, failed)."
    );
    describe_counter!(
        RENEWAL_ROUND_TRIPS,
        "Round trips that carried watchdog renewals (one pipeline of those due together)."
    );
    describe_counter!(LOCKS_LOST, "Guards that learned they lost their lock.");
    describe_counter!(
        REVOCATIONS,
        "Holds ended by an operator's revocation (Client::revoke, latchkey revoke)."
    );
    describe_counter!(
        RELEASES,
        "Releases of held locks, by outcome (released, expired, held_by_other, error)."
    );
    describe_counter!(
        COUNT_DOWNS,
        "Latch count-downs, by outcome (counted, opened, not_found, already_open, error)."
    );
    describe_counter!(SIGNALS_SENT, "Signals sent, by kind (broadcast, unicast).");
    describe_counter!(
        SIGNALS_RECEIVED,
        "Signals delivered to listeners, by kind (broadcast, unicast)."
    );
    describe_counter!(REDIS_ERRORS, "Failed Redis commands, by kind.");
}

/// Which `lock` label the primitives' metrics of a [`Client`](crate::Client) carry;
/// set with [`ClientBuilder::metrics_labels`](crate::ClientBuilder::metrics_labels).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricsLabels {
    /// No `lock` label: one time series per metric and outcome (default).
    #[default]
    None,
    /// `lock="<value>"` on every primitive metric: tells clients (services,
    /// subsystems) apart at a fixed cost.
    Static(String),
    /// `lock="<lock name>"` (lossily decoded as UTF-8): one time series per
    /// lock name. Only for a small, fixed set of names.
    LockName,
}

fn signal_kind(unicast: bool) -> &'static str {
    if unicast {
        "unicast"
    } else {
        "broadcast"
    }
}

pub(crate) fn signal_sent(unicast: bool) {
    counter!(SIGNALS_SENT, "kind" => signal_kind(unicast)).increment(1);
}

pub(crate) fn signal_received(unicast: bool) {
    counter!(SIGNALS_RECEIVED, "kind" => signal_kind(unicast)).increment(1);
}

/// Counts a round trip that carried watchdog renewals.
pub(crate) fn renewal_round_trip() {
    counter!(RENEWAL_ROUND_TRIPS).increment(1);
}

/// Counts a failed Redis command by the kind of its error.
pub(crate) fn redis_error(error: &Error) {
    // The kinds with a label of their own (the error's code, in lower
    // case); every other kind is "other".
    const LABELLED: &[&str] = &[
        "UNREACHABLE",
        "TIMEOUT",
        "AUTH",
        "NO_PERMISSION",
        "TLS",
        "WRONG_TYPE",
    ];
    let code = error.code();
    let kind = match LABELLED.contains(&code) {
        true => code.to_ascii_lowercase(),
        false => "other".to_owned(),
    };
    counter!(REDIS_ERRORS, "kind" => kind).increment(1);
}
