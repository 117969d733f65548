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
//!     // Every lock metric of this client gets `lock="billing"`:
//!     .metrics_labels(MetricsLabels::Static("billing".into()))
//!     .connect()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! The library depends on the facade only. Each lock builds the keys of its
//! metrics once (unlabelled locks share one set), so recording is a lookup
//! of the current recorder and a call to it; without an installed recorder
//! that is the facade's no-op recorder, a few nanoseconds. The names, types and labels below are a public interface
//! (`docs/monitoring.md` explains each and has alert rules and a dashboard).
//!
//! # Labels
//! Lock metrics carry a `lock` label as [`MetricsLabels`] says: none by
//! default, one fixed value, or the lock's name. The name is opt-in because
//! every distinct name is a new time series in the monitoring system: a
//! lock per customer or per job id would flood it. The label is computed
//! once per [`Lock`](crate::Lock), not per call. Client-wide metrics
//! (signals, Redis errors) never carry it.
//!
//! # Histograms
//! Durations are recorded in seconds. A Prometheus recorder renders a
//! histogram as a summary unless given buckets: [`SECONDS_BUCKETS`] suits
//! every `*_seconds` metric here.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ::metrics::{counter, describe_counter, describe_histogram, Key, Label, Level, Metadata, Unit};

use crate::vocab::error::Error;
use crate::vocab::outcome::Ownership;

/// Counter, label `outcome` = `ok` | `busy` | `timeout` | `error`: finished
/// acquire calls. `busy` is a [`try_acquire`](crate::Lock::try_acquire) that
/// found the lock held; `timeout` a waiting acquire whose deadline passed
/// ([`Error::WaitTimedOut`]); `error` any other error. A waiting acquire
/// that is cancelled (its future dropped) is not counted.
pub const ACQUISITIONS: &str = "latchkey_acquisitions_total";

/// Histogram (seconds): from the acquire call to the lock held, for every
/// successful acquisition (a `try_acquire` that got the lock: one round trip).
pub const ACQUIRE_WAIT: &str = "latchkey_acquire_wait_seconds";

/// Histogram (seconds): from the lock held to the guard released or
/// dropped (measured when `release` is called or the guard is dropped,
/// before the round trip), whatever the release finds.
pub const HOLD: &str = "latchkey_hold_seconds";

/// Histogram (seconds): for a waiter woken by a release notification (a
/// release message, or a release by its own client), from the wake-up
/// received to the lock held: the waiter's share of a handoff. Not measured
/// for the waiter that loses the race (it waits again) nor for one woken by
/// the holder's TTL running out. The share before it (release to message
/// delivered) needs the two processes' clocks; see `docs/monitoring.md`.
pub const HANDOFF: &str = "latchkey_handoff_seconds";

/// Counter, label `outcome` = `ok` | `failed`: lease renewals, by the
/// watchdog or [`LockGuard::extend`](crate::LockGuard::extend). `failed`
/// covers errors, timeouts and renewals that found the lock no longer ours.
pub const RENEWALS: &str = "latchkey_renewals_total";

/// Counter: guards that learned they lost their lock (a renewal or extension
/// found it gone or taken, or the lease ran out first). Counted once per
/// guard, when its [`lost`](crate::LockGuard::lost) signal fires.
pub const LOCKS_LOST: &str = "latchkey_locks_lost_total";

/// Counter, label `outcome` = `released` | `expired` | `held_by_other` |
/// `error`: releases of held locks, explicit or by a dropped guard.
/// `expired` and `held_by_other` are releases that found the lock already
/// gone (see [`Ownership`]).
pub const RELEASES: &str = "latchkey_releases_total";

/// Counter, label `kind` = `broadcast` | `unicast`: signals sent
/// ([`Client::signal`](crate::Client::signal); a
/// [`signal_one`](crate::Client::signal_one) only when a waiter got it).
pub const SIGNALS_SENT: &str = "latchkey_signals_sent_total";

/// Counter, label `kind` = `broadcast` | `unicast`: signals a
/// [`Listener`](crate::Listener) delivered (copies from several servers
/// count once).
pub const SIGNALS_RECEIVED: &str = "latchkey_signals_received_total";

/// Counter, label `kind` = `unreachable` | `timeout` | `auth` |
/// `no_permission` | `tls` | `wrong_type` | `other`: failed Redis commands on the
/// command connection (every instance of a Redlock counts its own).
pub const REDIS_ERRORS: &str = "latchkey_redis_errors_total";

/// The label key of lock metrics (see [`MetricsLabels`]).
pub const LOCK_LABEL: &str = "lock";

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
        "Finished lock acquire calls, by outcome (ok, busy, timeout, error)."
    );
    describe_histogram!(
        ACQUIRE_WAIT,
        Unit::Seconds,
        "From an acquire call to the lock held."
    );
    describe_histogram!(
        HOLD,
        Unit::Seconds,
        "From a lock held to its guard released or dropped."
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
    describe_counter!(LOCKS_LOST, "Guards that learned they lost their lock.");
    describe_counter!(
        RELEASES,
        "Releases of held locks, by outcome (released, expired, held_by_other, error)."
    );
    describe_counter!(SIGNALS_SENT, "Signals sent, by kind (broadcast, unicast).");
    describe_counter!(
        SIGNALS_RECEIVED,
        "Signals delivered to listeners, by kind (broadcast, unicast)."
    );
    describe_counter!(REDIS_ERRORS, "Failed Redis commands, by kind.");
}

/// Which `lock` label the lock metrics of a [`Client`](crate::Client) carry;
/// set with [`ClientBuilder::metrics_labels`](crate::ClientBuilder::metrics_labels).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricsLabels {
    /// No `lock` label: one time series per metric and outcome (default).
    #[default]
    None,
    /// `lock="<value>"` on every lock metric: tells clients (services,
    /// subsystems) apart at a fixed cost.
    Static(String),
    /// `lock="<lock name>"` (lossily decoded as UTF-8): one time series per
    /// lock name. Only for a small, fixed set of names.
    LockName,
}

/// The label of one lock, computed once by [`Lock`](crate::Lock)'s
/// constructor, with the keys of all its metrics: recording then hashes
/// and allocates nothing (building a key per call cost as much as the rest
/// of a guard's bookkeeping). Unlabelled locks share one set of keys.
/// Cloning shares them too.
#[derive(Debug, Clone)]
pub(crate) struct LockLabel(Arc<LockMetricKeys>);

#[derive(Debug)]
struct LockMetricKeys {
    /// By [`Outcome`], in its order.
    acquisitions: [Key; 4],
    acquire_wait: Key,
    hold: Key,
    handoff: Key,
    /// `ok`, `failed`.
    renewals: [Key; 2],
    locks_lost: Key,
    /// `released`, `expired`, `held_by_other`, `error`.
    releases: [Key; 4],
}

impl LockMetricKeys {
    fn new(label: Option<Label>) -> LockMetricKeys {
        let alone =
            |name: &'static str| Key::from_parts(name, label.iter().cloned().collect::<Vec<_>>());
        let with = |name: &'static str, key: &'static str, value: &'static str| {
            let mut labels = Vec::with_capacity(2);
            labels.extend(label.iter().cloned());
            labels.push(Label::from_static_parts(key, value));
            Key::from_parts(name, labels)
        };
        let acquisitions = |outcome: Outcome| with(ACQUISITIONS, "outcome", outcome.as_str());
        let releases = |outcome: &'static str| with(RELEASES, "outcome", outcome);
        LockMetricKeys {
            acquisitions: [
                acquisitions(Outcome::Ok),
                acquisitions(Outcome::Busy),
                acquisitions(Outcome::Timeout),
                acquisitions(Outcome::Error),
            ],
            acquire_wait: alone(ACQUIRE_WAIT),
            hold: alone(HOLD),
            handoff: alone(HANDOFF),
            renewals: [
                with(RENEWALS, "outcome", "ok"),
                with(RENEWALS, "outcome", "failed"),
            ],
            locks_lost: alone(LOCKS_LOST),
            releases: [
                releases("released"),
                releases("expired"),
                releases("held_by_other"),
                releases("error"),
            ],
        }
    }
}

impl LockLabel {
    pub(crate) fn new(policy: &MetricsLabels, name: &[u8]) -> LockLabel {
        static UNLABELLED: OnceLock<LockLabel> = OnceLock::new();
        let value: Arc<str> = match policy {
            MetricsLabels::None => {
                return UNLABELLED
                    .get_or_init(|| LockLabel(Arc::new(LockMetricKeys::new(None))))
                    .clone()
            }
            MetricsLabels::Static(value) => Arc::from(value.as_str()),
            MetricsLabels::LockName => Arc::from(String::from_utf8_lossy(name).as_ref()),
        };
        LockLabel(Arc::new(LockMetricKeys::new(Some(Label::new(
            LOCK_LABEL, value,
        )))))
    }
}

/// What the facade's macros would pass for a metric of this module.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// Adds one to a counter of the current recorder (looked up on every call,
/// as the macros do, so a recorder installed later still gets everything).
fn increment(key: &Key) {
    ::metrics::with_recorder(|recorder| recorder.register_counter(key, &METADATA).increment(1));
}

fn record(key: &Key, value: Duration) {
    ::metrics::with_recorder(|recorder| {
        recorder
            .register_histogram(key, &METADATA)
            .record(value.as_secs_f64())
    });
}

/// How an acquire call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok = 0,
    Busy = 1,
    Timeout = 2,
    Error = 3,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Busy => "busy",
            Outcome::Timeout => "timeout",
            Outcome::Error => "error",
        }
    }

    /// The outcome of a waiting acquire.
    pub(crate) fn of_wait<T>(result: &Result<T, Error>) -> Outcome {
        match result {
            Ok(_) => Outcome::Ok,
            Err(Error::WaitTimedOut { .. }) => Outcome::Timeout,
            Err(_) => Outcome::Error,
        }
    }

    /// The outcome of a `try_acquire`.
    pub(crate) fn of_try<T>(result: &Result<Option<T>, Error>) -> Outcome {
        match result {
            Ok(Some(_)) => Outcome::Ok,
            Ok(None) => Outcome::Busy,
            Err(_) => Outcome::Error,
        }
    }
}

/// Counts a finished acquire call; for a success also records its wait.
pub(crate) fn acquire_outcome(label: &LockLabel, outcome: Outcome, since_call: Duration) {
    increment(&label.0.acquisitions[outcome as usize]);
    if outcome == Outcome::Ok {
        record(&label.0.acquire_wait, since_call);
    }
}

pub(crate) fn hold_time(label: &LockLabel, held: Duration) {
    record(&label.0.hold, held);
}

pub(crate) fn handoff(label: &LockLabel, since_wakeup: Duration) {
    record(&label.0.handoff, since_wakeup);
}

pub(crate) fn renewal(label: &LockLabel, ok: bool) {
    increment(&label.0.renewals[usize::from(!ok)]);
}

pub(crate) fn lock_lost(label: &LockLabel) {
    increment(&label.0.locks_lost);
}

/// Counts a release; `None` for one that failed with an error.
pub(crate) fn release_outcome(label: &LockLabel, outcome: Option<Ownership>) {
    let index = match outcome {
        Some(Ownership::Owned) => 0,
        Some(Ownership::Expired) => 1,
        Some(Ownership::HeldByOther) => 2,
        None => 3,
    };
    increment(&label.0.releases[index]);
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

/// Counts a failed Redis command by the kind of its error.
pub(crate) fn redis_error(error: &Error) {
    let kind = match error {
        Error::Unreachable(_) => "unreachable",
        Error::Timeout { .. } => "timeout",
        Error::Auth(_) => "auth",
        Error::NoPermission(_) => "no_permission",
        Error::Tls { .. } => "tls",
        Error::WrongType { .. } => "wrong_type",
        _ => "other",
    };
    counter!(REDIS_ERRORS, "kind" => kind).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(key: &Key) -> Vec<Label> {
        key.labels().cloned().collect()
    }

    #[test]
    fn labels_follow_the_policy() {
        let none = LockLabel::new(&MetricsLabels::None, b"job");
        assert!(labels(&none.0.hold).is_empty());
        assert_eq!(none.0.hold.name(), HOLD);
        assert!(
            Arc::ptr_eq(&none.0, &LockLabel::new(&MetricsLabels::None, b"other").0),
            "unlabelled locks share their keys"
        );
        let fixed = LockLabel::new(&MetricsLabels::Static("billing".into()), b"job");
        assert_eq!(labels(&fixed.0.hold), vec![Label::new("lock", "billing")]);
        let named = LockLabel::new(&MetricsLabels::LockName, b"job\xff");
        let busy = &named.0.acquisitions[Outcome::Busy as usize];
        assert_eq!(busy.name(), ACQUISITIONS);
        assert_eq!(
            labels(busy),
            vec![
                Label::new("lock", "job\u{fffd}"),
                Label::new("outcome", "busy")
            ]
        );
        assert_eq!(
            labels(&named.0.releases[2]),
            vec![
                Label::new("lock", "job\u{fffd}"),
                Label::new("outcome", "held_by_other")
            ]
        );
        assert_eq!(
            labels(&named.0.renewals[1])[1],
            Label::new("outcome", "failed")
        );
    }
}
