//! The prebuilt keys of a primitive's metrics and the calls that record
//! them (layer 1): what [`LockLabel`] holds, built once per primitive.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ::metrics::{Key, Label, Level, Metadata};

use crate::vocab::error::Error;
use crate::vocab::kind::Kind;
use crate::vocab::metrics::{
    MetricsLabels, ACQUIRE_WAIT, ACQUISITIONS, CACHED_ACQUISITIONS, CACHE_GIVE_BACKS, COUNT_DOWNS,
    HANDOFF, HOLD, KIND_LABEL, LOCKS_LOST, LOCK_LABEL, RELEASES, RENEWALS, REVOCATIONS,
};
use crate::vocab::outcome::Ownership;

/// The labels of one primitive, computed once by its constructor, with the
/// keys of all its metrics: recording then hashes and allocates nothing
/// (building a key per call cost as much as the rest of a guard's
/// bookkeeping). Unlabelled primitives of one kind share one set of keys.
/// Cloning shares them too.
#[derive(Debug, Clone)]
pub(crate) struct LockLabel(pub(super) Arc<LockMetricKeys>);

#[derive(Debug)]
pub(super) struct LockMetricKeys {
    kind: Kind,
    /// The `lock` label, if any (for the rare metrics built per call).
    lock: Option<Label>,
    /// By [`Outcome`], in its order.
    pub(super) acquisitions: [Key; 4],
    acquire_wait: Key,
    pub(super) hold: Key,
    handoff: Key,
    /// `ok`, `failed`.
    pub(super) renewals: [Key; 2],
    /// `released`, `expired`, `held_by_other`, `error`.
    pub(super) releases: [Key; 4],
}

impl LockMetricKeys {
    fn new(kind: Kind, lock: Option<Label>) -> LockMetricKeys {
        let kind_label = Label::from_static_parts(KIND_LABEL, kind.as_str());
        let base = || {
            let mut labels = Vec::with_capacity(3);
            labels.extend(lock.iter().cloned());
            labels.push(kind_label.clone());
            labels
        };
        let alone = |name: &'static str| Key::from_parts(name, base());
        let with = |name: &'static str, key: &'static str, value: &'static str| {
            let mut labels = base();
            labels.push(Label::from_static_parts(key, value));
            Key::from_parts(name, labels)
        };
        LockMetricKeys {
            kind,
            acquisitions: [Outcome::Ok, Outcome::Busy, Outcome::Timeout, Outcome::Error]
                .map(|outcome| with(ACQUISITIONS, "outcome", outcome.as_str())),
            acquire_wait: alone(ACQUIRE_WAIT),
            hold: alone(HOLD),
            handoff: alone(HANDOFF),
            renewals: ["ok", "failed"].map(|outcome| with(RENEWALS, "outcome", outcome)),
            releases: ["released", "expired", "held_by_other", "error"]
                .map(|outcome| with(RELEASES, "outcome", outcome)),
            lock,
        }
    }
}

impl LockLabel {
    /// The labels of a primitive of `kind` called `name`, as `policy` says.
    pub(crate) fn new(policy: &MetricsLabels, kind: Kind, name: &[u8]) -> LockLabel {
        static UNLABELLED: [OnceLock<LockLabel>; 7] = [const { OnceLock::new() }; 7];
        let value: Arc<str> = match policy {
            MetricsLabels::None => {
                return UNLABELLED[kind as usize]
                    .get_or_init(|| LockLabel(Arc::new(LockMetricKeys::new(kind, None))))
                    .clone()
            }
            MetricsLabels::Static(value) => Arc::from(value.as_str()),
            MetricsLabels::LockName => Arc::from(String::from_utf8_lossy(name).as_ref()),
        };
        LockLabel(Arc::new(LockMetricKeys::new(
            kind,
            Some(Label::new(LOCK_LABEL, value)),
        )))
    }

    /// The `kind` label: for spans, which carry it too.
    pub(crate) fn kind(&self) -> &'static str {
        self.0.kind.as_str()
    }
}

/// What the facade's macros would pass for a metric of this module.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// Adds one to a counter of the current recorder (looked up on every call,
/// as the macros do, so a recorder installed later still gets everything).
/// Why a hold kept while idle went back to Redis ([`CACHE_GIVE_BACKS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GiveBack {
    Wanted = 0,
    Idle = 1,
    Flush = 2,
    Lost = 3,
}

/// The keys of a cached lock's own metrics, built once per lock.
#[derive(Debug)]
pub(crate) struct CacheKeys {
    /// `local`, `redis`.
    acquired: [Key; 2],
    /// By [`GiveBack`], in its order.
    given_back: [Key; 4],
}

impl CacheKeys {
    pub(crate) fn new(label: &LockLabel) -> CacheKeys {
        let keys = &label.0;
        let with = |name: &'static str, key: &'static str, value: &'static str| {
            let mut labels = Vec::with_capacity(3);
            labels.extend(keys.lock.iter().cloned());
            labels.push(Label::from_static_parts(KIND_LABEL, keys.kind.as_str()));
            labels.push(Label::from_static_parts(key, value));
            Key::from_parts(name, labels)
        };
        CacheKeys {
            acquired: ["local", "redis"].map(|from| with(CACHED_ACQUISITIONS, "from", from)),
            // In `GiveBack`'s order.
            given_back: ["wanted", "idle", "flush", "lost"]
                .map(|reason| with(CACHE_GIVE_BACKS, "reason", reason)),
        }
    }

    /// Counts an acquisition: from the hold kept (`local`) or from Redis.
    pub(crate) fn acquired(&self, local: bool) {
        increment(&self.acquired[usize::from(!local)]);
    }

    /// Counts a hold given back, and why.
    pub(crate) fn given_back(&self, why: GiveBack) {
        increment(&self.given_back[why as usize]);
    }
}

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

/// How an acquire call (or a latch's or barrier's wait, a campaign) ended.
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

/// Counts a hold that learned it was lost, by why: built when it happens
/// (rare), so that every primitive made pays for no key it never uses.
pub(crate) fn lock_lost(label: &LockLabel, reason: crate::vocab::outcome::LostReason) {
    let keys = &label.0;
    let mut labels = Vec::with_capacity(3);
    labels.extend(keys.lock.iter().cloned());
    labels.push(Label::from_static_parts(KIND_LABEL, keys.kind.as_str()));
    labels.push(Label::from_static_parts("reason", reason.as_str()));
    increment(&Key::from_parts(LOCKS_LOST, labels));
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

/// Counts a latch's count-down by what it found: the count left (0: this
/// call opened the latch) or the error. Built per call: a count-down is
/// not a hot path, and most primitives never count down.
pub(crate) fn count_down(label: &LockLabel, result: &Result<u64, Error>) {
    let outcome = match result {
        Ok(0) => "opened",
        Ok(_) => "counted",
        Err(Error::NotFound { .. }) => "not_found",
        Err(Error::CountedBelowZero { .. }) => "already_open",
        Err(_) => "error",
    };
    let mut labels = Vec::with_capacity(3);
    labels.extend(label.0.lock.iter().cloned());
    labels.push(Label::from_static_parts(KIND_LABEL, label.kind()));
    labels.push(Label::from_static_parts("outcome", outcome));
    increment(&Key::from_parts(COUNT_DOWNS, labels));
}

/// Counts the holds an operator revoked ([`Client::revoke`](crate::Client::revoke)),
/// under the primitive's `kind` (and `lock`, as the client's policy says).
/// Built per call: a revocation is rare.
pub(crate) fn revoked(policy: &MetricsLabels, kind: &'static str, name: &[u8], ended: u64) {
    let mut labels = Vec::with_capacity(2);
    match policy {
        MetricsLabels::None => {}
        MetricsLabels::Static(value) => labels.push(Label::new(LOCK_LABEL, value.clone())),
        MetricsLabels::LockName => labels.push(Label::new(
            LOCK_LABEL,
            String::from_utf8_lossy(name).into_owned(),
        )),
    }
    labels.push(Label::from_static_parts(KIND_LABEL, kind));
    let key = Key::from_parts(REVOCATIONS, labels);
    ::metrics::with_recorder(|recorder| {
        recorder.register_counter(&key, &METADATA).increment(ended)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(key: &Key) -> Vec<Label> {
        key.labels().cloned().collect()
    }

    #[test]
    fn labels_follow_the_policy() {
        let none = LockLabel::new(&MetricsLabels::None, Kind::Lock, b"job");
        assert_eq!(labels(&none.0.hold), vec![Label::new("kind", "lock")]);
        assert_eq!(none.0.hold.name(), HOLD);
        assert!(
            Arc::ptr_eq(
                &none.0,
                &LockLabel::new(&MetricsLabels::None, Kind::Lock, b"other").0
            ),
            "unlabelled locks share their keys"
        );
        let semaphore = LockLabel::new(&MetricsLabels::None, Kind::Semaphore, b"job");
        assert!(!Arc::ptr_eq(&none.0, &semaphore.0), "one set per kind");
        assert_eq!(
            labels(&semaphore.0.hold),
            vec![Label::new("kind", "semaphore")]
        );
        let fixed = LockLabel::new(
            &MetricsLabels::Static("billing".into()),
            Kind::Election,
            b"job",
        );
        assert_eq!(
            labels(&fixed.0.hold),
            vec![
                Label::new("lock", "billing"),
                Label::new("kind", "election")
            ]
        );
        let named = LockLabel::new(&MetricsLabels::LockName, Kind::FairLock, b"job\xff");
        let busy = &named.0.acquisitions[Outcome::Busy as usize];
        assert_eq!(busy.name(), ACQUISITIONS);
        assert_eq!(
            labels(busy),
            vec![
                Label::new("lock", "job\u{fffd}"),
                Label::new("kind", "fair-lock"),
                Label::new("outcome", "busy")
            ]
        );
        assert_eq!(
            labels(&named.0.releases[2])[2],
            Label::new("outcome", "held_by_other")
        );
        assert_eq!(
            labels(&named.0.renewals[1])[2],
            Label::new("outcome", "failed")
        );
    }
}
