//! The exporter's series per kind of primitive (a `kind` label: `lock`,
//! `fair-lock`, `semaphore`, `rwlock`, `latch`, `barrier`, `election`), set
//! from each scan's [`Client::list_all`](latchkey::Client::list_all); see
//! `docs/monitoring.md`. No label carries an owner token.

use std::time::Duration;

use latchkey::inspect::PrimitiveInfo;
use latchkey::Kind;
use metrics::{describe_gauge, gauge, Unit};

/// Gauge, labels `prefix`, `kind`: active primitives of each kind (held,
/// waited for, a latch not yet open, a barrier with parties arrived, an
/// election with a leader); every kind is set, 0 included.
pub const PRIMITIVES_ACTIVE: &str = "latchkey_primitives_active";
/// Gauge, labels `prefix`, `kind`, `name`: what holds each active primitive:
/// 1 for a held lock or a leader, the permits held of a semaphore, readers
/// plus writer of a read-write lock, the parties arrived at a barrier, and
/// the count left of a latch.
pub const PRIMITIVE_HOLDERS: &str = "latchkey_primitive_holders";
/// Gauge, labels `prefix`, `kind`, `name`: waiters that Redis records, for
/// the kinds that record them (a fair lock's queue, a read-write lock's
/// waiting writers and readers).
pub const PRIMITIVE_WAITING: &str = "latchkey_primitive_waiting";
/// Gauge, labels `prefix`, `kind`, `name`: how long the oldest holder of each
/// active primitive has held it (by its clock against the exporter's).
pub const PRIMITIVE_AGE: &str = "latchkey_primitive_age_seconds";
/// Gauge, labels `prefix`, `kind`, `name`, `host`, `pid`: the oldest
/// holder's age of each primitive held longer than `--long-held`, with that
/// holder: the suspects of every kind (locks included; `LOCK_LONG_HELD` is
/// the locks' series of 0.3).
pub const PRIMITIVE_LONG_HELD: &str = "latchkey_primitive_long_held_seconds";
/// Sets the per-kind series from one scan: active primitives of each kind,
/// and the holders, waiters and oldest holder's age of each active one (and
/// its holder, when older than `long_held`).
pub fn export(prefix: &str, all: &[PrimitiveInfo], long_held: Duration) {
    const KINDS: [Kind; 7] = [
        Kind::Lock,
        Kind::FairLock,
        Kind::Semaphore,
        Kind::RwLock,
        Kind::Latch,
        Kind::Barrier,
        Kind::Election,
    ];
    for kind in KINDS {
        let active = all
            .iter()
            .filter(|info| info.kind() == kind && info.is_active())
            .count();
        gauge!(PRIMITIVES_ACTIVE, "prefix" => prefix.to_owned(), "kind" => kind.as_str())
            .set(active as f64);
    }
    for info in all.iter().filter(|info| info.is_active()) {
        let labels = [
            ("prefix", prefix.to_owned()),
            ("kind", info.kind().as_str().to_owned()),
            ("name", String::from_utf8_lossy(info.name()).into_owned()),
        ];
        gauge!(PRIMITIVE_HOLDERS, &labels).set(info.holders() as f64);
        if matches!(info.kind(), Kind::FairLock | Kind::RwLock) {
            gauge!(PRIMITIVE_WAITING, &labels).set(info.waiting() as f64);
        }
        if let Some((holder, age)) = info.oldest() {
            gauge!(PRIMITIVE_AGE, &labels).set(age.as_secs_f64());
            if age > long_held {
                let mut suspect = labels.to_vec();
                suspect.push(("host", holder.host.clone()));
                suspect.push(("pid", holder.pid.to_string()));
                gauge!(PRIMITIVE_LONG_HELD, &suspect).set(age.as_secs_f64());
            }
        }
    }
}

/// Describes the per-kind series to the recorder.
pub fn describe() {
    describe_gauge!(
        PRIMITIVES_ACTIVE,
        "Active primitives of each kind (server-side scan)."
    );
    describe_gauge!(
        PRIMITIVE_HOLDERS,
        "Holders of each active primitive (permits, readers + writer, arrivals; a latch's count left)."
    );
    describe_gauge!(
        PRIMITIVE_WAITING,
        "Waiters Redis records for each fair lock and read-write lock."
    );
    describe_gauge!(
        PRIMITIVE_AGE,
        Unit::Seconds,
        "How long the oldest holder of each active primitive has held it."
    );
    describe_gauge!(
        PRIMITIVE_LONG_HELD,
        Unit::Seconds,
        "Age of the oldest holder of each primitive held longer than --long-held, with its host and pid."
    );
}
