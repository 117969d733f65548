//! What the semaphore and read-write lock models share: the keyspace kept
//! as hashable data between steps (strings, sets and sorted sets, the
//! types their scripts write), the clients' tokens, replies read as
//! integers, and a script's text patched for a mutant.
//!
//! The plain lock model keeps strings only (`lock_step.rs`); these models
//! need sorted sets, whose `f64` scores do not hash, so a score is kept as
//! the integer it always is here (server ms, written with `%.0f`).

use std::collections::{BTreeMap, BTreeSet};

use crate::keyspace::{Value, ZSet};
use crate::model::lock::START_MICROS;
use crate::reply::Reply;
use crate::server::Server;

/// One key's value, as a state keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stored {
    /// A string.
    Str(Vec<u8>),
    /// A set, in member order.
    Set(BTreeSet<Vec<u8>>),
    /// A sorted set: member → score, in member order.
    ZSet(BTreeMap<Vec<u8>, i64>),
}

/// The live keys: key → (value, expiry in server ms).
pub type Keys = BTreeMap<Vec<u8>, (Stored, Option<i64>)>;

/// Sets `server` to the state's clock (`now` ms since the model's start)
/// and keys.
pub(crate) fn load(server: &mut Server, now: i64, keys: &Keys) {
    server.flush();
    server.set_micros(START_MICROS + now * 1000);
    for (k, (v, at)) in keys {
        let value = match v {
            Stored::Str(s) => Value::Str(s.clone()),
            Stored::Set(s) => Value::Set(s.clone()),
            Stored::ZSet(z) => {
                let mut set = ZSet::default();
                for (m, score) in z {
                    set.insert(m.clone(), *score as f64);
                }
                Value::ZSet(set)
            }
        };
        server.put(k, value, *at);
    }
}

/// Reads the server's live keys back; `Err` names a key of a type these
/// models never write, or a score that is not a whole number of ms (the
/// model sent what the library does not).
pub(crate) fn store(server: &Server) -> Result<Keys, String> {
    let mut keys = Keys::new();
    for (k, e) in server.entries() {
        let name = || String::from_utf8_lossy(&k).into_owned();
        let v = match e.value {
            Value::Str(v) => Stored::Str(v),
            Value::Set(s) => Stored::Set(s),
            Value::ZSet(z) => {
                let mut out = BTreeMap::new();
                for (m, score) in z.ordered() {
                    if score.fract() != 0.0 || !score.is_finite() {
                        return Err(format!("{} has the score {score}", name()));
                    }
                    out.insert(m.to_vec(), score as i64);
                }
                Stored::ZSet(out)
            }
            other => return Err(format!("{} holds a {}", name(), other.type_name())),
        };
        keys.insert(k, (v, e.expires_at));
    }
    Ok(keys)
}

/// The sorted set at `key`'s members whose score is above `now_ms` (server
/// ms): those the scripts count as live (they prune scores up to now).
pub(crate) fn live_members(keys: &Keys, key: &[u8], now_ms: i64) -> Vec<Vec<u8>> {
    match keys.get(key) {
        Some((Stored::ZSet(z), _)) => z
            .iter()
            .filter(|(_, score)| **score > now_ms)
            .map(|(m, _)| m.clone())
            .collect(),
        _ => Vec::new(),
    }
}

/// The scores above `now_ms` of the sorted set at `key`, lowest first.
pub(crate) fn live_scores(keys: &Keys, key: &[u8], now_ms: i64) -> Vec<i64> {
    let mut scores: Vec<i64> = match keys.get(key) {
        Some((Stored::ZSet(z), _)) => z.values().copied().filter(|s| *s > now_ms).collect(),
        _ => Vec::new(),
    };
    scores.sort_unstable();
    scores
}

/// The set at `key`'s members.
pub(crate) fn set_members(keys: &Keys, key: &[u8]) -> BTreeSet<Vec<u8>> {
    match keys.get(key) {
        Some((Stored::Set(s), _)) => s.clone(),
        _ => BTreeSet::new(),
    }
}

/// The server's clock in ms for the model's time `now`, as scripts read it.
pub(crate) fn server_ms(now: i64) -> i64 {
    START_MICROS / 1000 + now
}

/// A client's token for one attempt: the shape of a library token (`lk2:`,
/// no `#`, so a hold of k permits adds `#2` … `#k` without collisions).
pub(crate) fn token(client: usize, attempt: u32) -> String {
    format!("lk2:c{client}a{attempt}:0:sim")
}

/// A reply's integers: an array's items (a non-integer item as `i64::MIN`)
/// or a single integer; nothing for anything else.
pub(crate) fn ints(reply: &Reply) -> Vec<i64> {
    match reply {
        Reply::Array(Some(items)) => items
            .iter()
            .map(|r| match r {
                Reply::Int(n) => *n,
                _ => i64::MIN,
            })
            .collect(),
        Reply::Int(n) => vec![*n],
        _ => Vec::new(),
    }
}

/// `text` with `from` replaced by `to`; an error when `from` is not there,
/// so that a script's change cannot turn a mutant into the original.
pub(crate) fn mutate(text: &mut String, from: &str, to: &str) -> Result<(), String> {
    if !text.contains(from) {
        return Err(format!("mutant: {from:?} is no longer in the script"));
    }
    *text = text.replacen(from, to, 1);
    Ok(())
}

/// A script's text as the library sends it (preludes included).
pub(crate) fn script(file: &str) -> Result<String, String> {
    latchkey::protocol::script_text(file)
        .map(str::to_string)
        .ok_or_else(|| format!("no script {file}"))
}
