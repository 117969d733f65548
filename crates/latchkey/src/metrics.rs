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
//! The library depends on the facade only. Without an installed recorder
//! every call goes to the facade's no-op recorder: a key built and dropped,
//! about 30–50 ns per acquisition (counter and histogram, measured), nothing
//! next to its round trip to Redis. The names, types and labels below are a public interface
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

use std::sync::Arc;
use std::time::Duration;

use ::metrics::{counter, describe_counter, describe_histogram, histogram, Label, Unit};

use crate::error::Error;
use crate::lock::Release;

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
/// gone (see [`Release`]).
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
/// `no_permission` | `wrong_type` | `other`: failed Redis commands on the
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
/// constructor; cloning it shares the value.
#[derive(Debug, Clone, Default)]
pub(crate) struct LockLabel(Option<Label>);

impl LockLabel {
    pub(crate) fn new(policy: &MetricsLabels, name: &[u8]) -> LockLabel {
        let value: Arc<str> = match policy {
            MetricsLabels::None => return LockLabel(None),
            MetricsLabels::Static(value) => Arc::from(value.as_str()),
            MetricsLabels::LockName => Arc::from(String::from_utf8_lossy(name).as_ref()),
        };
        LockLabel(Some(Label::new(LOCK_LABEL, value)))
    }

    /// This label plus a static one (outcome, kind).
    fn with(&self, key: &'static str, value: &'static str) -> Vec<Label> {
        let mut labels = Vec::with_capacity(2);
        labels.extend(self.0.clone());
        labels.push(Label::from_static_parts(key, value));
        labels
    }

    fn alone(&self) -> Vec<Label> {
        self.0.iter().cloned().collect()
    }
}

/// How an acquire call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Busy,
    Timeout,
    Error,
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
    counter!(ACQUISITIONS, label.with("outcome", outcome.as_str())).increment(1);
    if outcome == Outcome::Ok {
        histogram!(ACQUIRE_WAIT, label.alone()).record(since_call.as_secs_f64());
    }
}

pub(crate) fn hold_time(label: &LockLabel, held: Duration) {
    histogram!(HOLD, label.alone()).record(held.as_secs_f64());
}

pub(crate) fn handoff(label: &LockLabel, since_wakeup: Duration) {
    histogram!(HANDOFF, label.alone()).record(since_wakeup.as_secs_f64());
}

pub(crate) fn renewal(label: &LockLabel, ok: bool) {
    let outcome = if ok { "ok" } else { "failed" };
    counter!(RENEWALS, label.with("outcome", outcome)).increment(1);
}

pub(crate) fn lock_lost(label: &LockLabel) {
    counter!(LOCKS_LOST, label.alone()).increment(1);
}

/// Counts a release; `None` for one that failed with an error.
pub(crate) fn release_outcome(label: &LockLabel, outcome: Option<Release>) {
    let outcome = match outcome {
        Some(Release::Released) => "released",
        Some(Release::Expired) => "expired",
        Some(Release::HeldByOther) => "held_by_other",
        None => "error",
    };
    counter!(RELEASES, label.with("outcome", outcome)).increment(1);
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
        Error::WrongType { .. } => "wrong_type",
        _ => "other",
    };
    counter!(REDIS_ERRORS, "kind" => kind).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_the_policy() {
        assert!(LockLabel::new(&MetricsLabels::None, b"job")
            .alone()
            .is_empty());
        let fixed = LockLabel::new(&MetricsLabels::Static("billing".into()), b"job");
        assert_eq!(fixed.alone(), vec![Label::new("lock", "billing")]);
        let named = LockLabel::new(&MetricsLabels::LockName, b"job\xff");
        assert_eq!(
            named.with("outcome", "ok"),
            vec![
                Label::new("lock", "job\u{fffd}"),
                Label::new("outcome", "ok")
            ]
        );
    }
}
