//! Every kind of primitive for people and scripts: the one-line summaries,
//! detail lines and JSON objects that `status`, `list`, `top` and the
//! exporter show for a [`PrimitiveInfo`]. Holders are shown by host and pid;
//! an owner token never is (whoever has it can release the hold), but for
//! another client's lock value, which is not latchkey's token.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use latchkey::inspect::{Holder, Holding, LockInfo, PrimitiveInfo};
use latchkey::Kind;
use serde_json::{json, Map, Value};

use crate::support::duration::human;
use crate::support::text::escape;

/// `web-1 pid 4242`, or `another client` for a token not made by latchkey;
/// `web-1 pid 4242 (kept while idle)` for a holder that keeps the lock
/// when it is not using it (`Lock::with_caching`: it lets go when asked).
pub fn who(holder: Option<&Holder>) -> String {
    match holder {
        Some(h) if h.caching => format!(
            "{} pid {} (kept while idle)",
            escape(h.host.as_bytes()),
            h.pid
        ),
        Some(h) => format!("{} pid {}", escape(h.host.as_bytes()), h.pid),
        None => "another client".to_owned(),
    }
}

/// How long `holder` has held, by its clock against ours.
fn age(holder: &Holder) -> Duration {
    SystemTime::now()
        .duration_since(holder.acquired_at)
        .unwrap_or_default()
}

/// `web-1 pid 4242 for 3.20s, expires in 26.8s`.
fn holding_text(h: &Holding) -> String {
    let since = h
        .holder
        .as_ref()
        .map(|holder| format!(" for {}", human(age(holder))))
        .unwrap_or_default();
    let expiry = match h.ttl {
        Some(ttl) => format!("expires in {}", human(ttl)),
        None => "no TTL".to_owned(),
    };
    format!("{}{since}, {expiry}", who(h.holder.as_ref()))
}

/// One line about a lock, for people (`status`, and a busy lock's errors).
pub fn lock_line(info: &LockInfo) -> String {
    let fence = match (info.fencing_token, &info.bad_fencing_counter) {
        (Some(token), _) => format!("fencing token {token}"),
        (None, Some(_)) => "fencing counter invalid".to_owned(),
        (None, None) => "never acquired by latchkey".to_owned(),
    };
    if !info.held {
        return match (info.fencing_token, &info.bad_fencing_counter) {
            (Some(token), _) => format!("free, last fencing token {token}"),
            (None, Some(_)) => "free, fencing counter invalid".to_owned(),
            (None, None) => "free, never acquired".to_owned(),
        };
    }
    let holder = lock_holder(info).unwrap_or_default();
    let age = info
        .age
        .map(|a| format!(" for {}", human(a)))
        .unwrap_or_default();
    let expiry = match info.ttl {
        Some(ttl) => format!("expires in {}", human(ttl)),
        None => "no TTL: it never expires by itself".to_owned(),
    };
    format!("held by {holder}{age}, {expiry}, {fence}")
}

/// A lock's holder: host and pid, or another client's raw value.
pub fn lock_holder(info: &LockInfo) -> Option<String> {
    match (&info.holder, &info.value) {
        (Some(h), _) => Some(who(Some(h))),
        (None, Some(value)) => Some(format!(
            "another client (value {:?})",
            String::from_utf8_lossy(value)
        )),
        (None, None) => None,
    }
}

/// The line `status` prints after `NAME: `.
pub fn summary(info: &PrimitiveInfo) -> String {
    match info {
        PrimitiveInfo::Lock(lock) => lock_line(lock),
        PrimitiveInfo::FairLock(fair) => format!(
            "fair lock {}; {} waiting, in order:",
            lock_line(&fair.lock),
            fair.queue.len()
        ),
        PrimitiveInfo::Semaphore(s) => {
            let fence = s
                .fencing_token
                .map(|t| format!(", last fencing token {t}"))
                .unwrap_or_default();
            match s.permits.len() {
                0 => format!("no semaphore permit held{fence}"),
                // As 0.3 said it (scripts may match it).
                n => format!("{n} semaphore permit(s) held{fence}:"),
            }
        }
        PrimitiveInfo::RwLock(rw) => {
            let held = match (&rw.writer, rw.readers.len()) {
                (Some(w), _) => format!("written by {}", holding_text(w)),
                (None, 0) => "free".to_owned(),
                (None, n) => format!("read by {n}"),
            };
            let fence = rw
                .fencing_token
                .map(|t| format!(", last fencing token {t}"))
                .unwrap_or_default();
            let waiting = match (rw.writers_waiting.len(), rw.readers_waiting.len()) {
                (0, 0) => String::new(),
                (w, r) => format!("; {w} writer(s) and {r} reader(s) waiting"),
            };
            format!("read-write lock, {held}{waiting}{fence}")
        }
        PrimitiveInfo::Latch(l) => {
            let expiry = l
                .ttl
                .map(|t| format!(", expires in {}", human(t)))
                .unwrap_or_default();
            match l.count {
                Some(0) => format!("latch, open{expiry}"),
                Some(n) => format!("latch, count {n} left{expiry}"),
                None => "latch key holds no count (another program wrote it)".to_owned(),
            }
        }
        PrimitiveInfo::Barrier(b) => {
            let parties = b.parties.map_or("?".to_owned(), |p| p.to_string());
            let expiry = b
                .ttl
                .map(|t| format!(", expires in {}", human(t)))
                .unwrap_or_default();
            format!(
                "barrier, {} of {parties} arrived, generation {}{expiry}",
                b.arrived, b.generation
            )
        }
        PrimitiveInfo::Election(e) => match (&e.leader, e.lease_unrecorded) {
            (Some(leader), _) => format!(
                "election, led by {}, term {}, value {:?}",
                holding_text(leader),
                e.term.unwrap_or(0),
                String::from_utf8_lossy(e.value.as_deref().unwrap_or_default())
            ),
            (None, true) => "election, its lease is held by a token it does not record".to_owned(),
            (None, false) => match e.last_term {
                Some(t) => format!("election, nobody leads, last term {t}"),
                None => "election, nobody leads".to_owned(),
            },
        },
        _ => format!("a {} (not known to this latchkey)", info.kind()),
    }
}

/// The lines `status` prints under the summary, indented: permits, a fair
/// queue in order, readers and waiting writers.
pub fn detail_lines(info: &PrimitiveInfo) -> Vec<String> {
    let each = |label: &str, hs: &[Holding]| -> Vec<String> {
        hs.iter()
            .map(|h| format!("  {label}{}", holding_text(h)))
            .collect()
    };
    match info {
        PrimitiveInfo::FairLock(fair) => fair
            .queue
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let lease = h.ttl.map_or("-".into(), human);
                format!(
                    "  {}. {}, lease {lease} left",
                    i + 1,
                    who(h.holder.as_ref())
                )
            })
            .collect(),
        PrimitiveInfo::Semaphore(s) => each("", &s.permits),
        PrimitiveInfo::RwLock(rw) => [
            each("reader ", &rw.readers),
            each("writer waiting: ", &rw.writers_waiting),
            each("reader waiting: ", &rw.readers_waiting),
        ]
        .concat(),
        _ => Vec::new(),
    }
}

/// Whether someone holds it: a lock's holder, a permit, a reader or the
/// writer, a leader. A latch or a barrier is never held.
pub fn is_held(info: &PrimitiveInfo) -> bool {
    !matches!(info.kind(), Kind::Latch | Kind::Barrier) && info.holders() > 0
}

/// The HOLDER cell of `list` and `top`: who, or what it waits for.
pub fn holder_cell(info: &PrimitiveInfo) -> String {
    let oldest = || info.oldest().map(|(h, _)| who(Some(h)));
    match info {
        PrimitiveInfo::Lock(lock) => lock_holder(lock).unwrap_or_else(|| "-".into()),
        PrimitiveInfo::FairLock(fair) => format!(
            "{} +{} queued",
            lock_holder(&fair.lock).unwrap_or_else(|| "-".into()),
            fair.queue.len()
        ),
        PrimitiveInfo::Semaphore(s) => match s.permits.len() {
            0 => "-".into(),
            1 => oldest().unwrap_or_else(|| "1 permit".into()),
            n => format!("{n} permits"),
        },
        PrimitiveInfo::RwLock(rw) => {
            let held = match (&rw.writer, rw.readers.len()) {
                (Some(w), _) => format!("writer {}", who(w.holder.as_ref())),
                (None, 0) => "-".into(),
                (None, n) => format!("{n} reader(s)"),
            };
            match rw.writers_waiting.len() {
                0 => held,
                n => format!("{held} +{n} writer(s) waiting"),
            }
        }
        PrimitiveInfo::Latch(l) => match l.count {
            Some(0) => "open".into(),
            Some(n) => format!("count {n}"),
            None => "invalid".into(),
        },
        PrimitiveInfo::Barrier(b) => format!(
            "{}/{} arrived",
            b.arrived,
            b.parties.map_or("?".into(), |p| p.to_string())
        ),
        PrimitiveInfo::Election(e) => match &e.leader {
            Some(l) => format!("leader {}", who(l.holder.as_ref())),
            None => "no leader".into(),
        },
        _ => "-".into(),
    }
}

/// The TTL cell: what expires first of what holds it (`None`: nothing, or
/// held without a TTL).
pub fn ttl(info: &PrimitiveInfo) -> Option<Duration> {
    let soonest = |hs: &[Holding]| hs.iter().filter_map(|h| h.ttl).min();
    match info {
        PrimitiveInfo::Lock(lock) => lock.ttl,
        PrimitiveInfo::FairLock(fair) => fair.lock.ttl,
        PrimitiveInfo::Semaphore(s) => soonest(&s.permits),
        PrimitiveInfo::RwLock(rw) => match &rw.writer {
            Some(w) => w.ttl,
            None => soonest(&rw.readers),
        },
        PrimitiveInfo::Latch(l) => l.ttl,
        PrimitiveInfo::Barrier(b) => b.ttl,
        PrimitiveInfo::Election(e) => e.leader.as_ref().and_then(|l| l.ttl),
        _ => None,
    }
}

/// The FENCING TOKEN cell: a lock's, a semaphore's or a writer's last
/// token, an election's term.
pub fn fence(info: &PrimitiveInfo) -> Option<u64> {
    match info {
        PrimitiveInfo::Lock(lock) => lock.fencing_token,
        PrimitiveInfo::FairLock(fair) => fair.lock.fencing_token,
        PrimitiveInfo::Semaphore(s) => s.fencing_token,
        PrimitiveInfo::RwLock(rw) => rw.fencing_token,
        PrimitiveInfo::Election(e) => e.term.or(e.last_term),
        _ => None,
    }
}

/// The lock fields of `--json`: `name`, `held`, `ttl_ms`, `holder` (with
/// `caching`: kept while idle), `age_ms`, `fencing_token`.
pub fn lock_json(info: &LockInfo) -> Map<String, Value> {
    let holder = match (&info.holder, &info.value) {
        (Some(h), _) => json!({
            "host": h.host,
            "pid": h.pid,
            "acquired_at_ms": millis_since_epoch(h.acquired_at),
            "caching": h.caching,
        }),
        (None, Some(value)) => json!({ "value": String::from_utf8_lossy(value) }),
        (None, None) => Value::Null,
    };
    let value = json!({
        "name": String::from_utf8_lossy(&info.name),
        "held": info.held,
        "ttl_ms": info.ttl.map(|t| t.as_millis() as u64),
        "holder": holder,
        "age_ms": info.age.map(|a| a.as_millis() as u64),
        "fencing_token": info.fencing_token,
    });
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn millis_since_epoch(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `[{"host", "pid", "acquired_at_ms", "ttl_ms"}]`; host, pid and
/// acquired_at_ms null for a token not made by latchkey. No owner token.
pub fn holdings_json(hs: &[Holding]) -> Value {
    Value::Array(hs.iter().map(holding_json).collect())
}

fn holding_json(h: &Holding) -> Value {
    json!({
        "host": h.holder.as_ref().map(|h| h.host.clone()),
        "pid": h.holder.as_ref().map(|h| h.pid),
        "acquired_at_ms": h.holder.as_ref().map(|h| millis_since_epoch(h.acquired_at)),
        "ttl_ms": h.ttl.map(|t| t.as_millis() as u64),
    })
}

/// One primitive as `list --json` prints it: `name`, `kind`, `held`, and
/// the kind's own fields (a lock's as before; see docs/cli.md).
pub fn to_json(info: &PrimitiveInfo) -> Value {
    let mut map = Map::new();
    map.insert("name".into(), json!(String::from_utf8_lossy(info.name())));
    map.insert("kind".into(), json!(info.kind().as_str()));
    map.insert("held".into(), json!(is_held(info)));
    let fields = match info {
        PrimitiveInfo::Lock(lock) => Value::Object(lock_json(lock)),
        PrimitiveInfo::FairLock(fair) => {
            let mut lock = lock_json(&fair.lock);
            lock.insert("queue".into(), holdings_json(&fair.queue));
            Value::Object(lock)
        }
        PrimitiveInfo::Semaphore(s) => json!({
            "permits": holdings_json(&s.permits),
            "fencing_token": s.fencing_token,
        }),
        PrimitiveInfo::RwLock(rw) => json!({
            "writer": rw.writer.as_ref().map(holding_json),
            "readers": holdings_json(&rw.readers),
            "writers_waiting": holdings_json(&rw.writers_waiting),
            "readers_waiting": holdings_json(&rw.readers_waiting),
            "readers_next": rw.readers_next,
            "fencing_token": rw.fencing_token,
        }),
        PrimitiveInfo::Latch(l) => json!({
            "count": l.count,
            "open": l.count == Some(0),
            "ttl_ms": l.ttl.map(|t| t.as_millis() as u64),
        }),
        PrimitiveInfo::Barrier(b) => json!({
            "parties": b.parties,
            "arrived": b.arrived,
            "generation": b.generation,
            "ttl_ms": b.ttl.map(|t| t.as_millis() as u64),
        }),
        PrimitiveInfo::Election(e) => json!({
            "leader": e.leader.as_ref().map(holding_json),
            "term": e.term,
            "value": e.value.as_deref().map(String::from_utf8_lossy),
            "last_term": e.last_term,
        }),
        _ => Value::Null,
    };
    if let Value::Object(fields) = fields {
        for (k, v) in fields {
            // `held` is the kind-neutral one above (the same for a lock).
            map.entry(k).or_insert(v);
        }
    }
    Value::Object(map)
}
