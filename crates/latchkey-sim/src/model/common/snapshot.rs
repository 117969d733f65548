//! The keyspace kept as hashable data between steps: the states of the
//! semaphore, read-write lock, election, latch and barrier models keep
//! their keys this way, and a step sets the one simulated server to them
//! ([`load`]) and reads them back ([`store`]).
//!
//! A sorted set's `f64` scores do not hash, so a score is kept as the
//! integer it always is here (server ms, written with `%.0f`).

use std::collections::{BTreeMap, BTreeSet};

use crate::keyspace::{Value, ZSet};
use crate::model::lock::START_MICROS;
use crate::server::Server;

/// One key's value, as a state keeps it: the types the scripts write.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stored {
    /// A string.
    Str(Vec<u8>),
    /// A set, in member order.
    Set(BTreeSet<Vec<u8>>),
    /// A sorted set: member → score, in member order.
    ZSet(BTreeMap<Vec<u8>, i64>),
    /// A hash, its fields in order.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
}

/// The live keys: key → (value, expiry in server ms).
pub type Keys = BTreeMap<Vec<u8>, (Stored, Option<i64>)>;

/// Sets `server` to the model's time `now` (ms since its start) and `keys`.
pub fn load(server: &mut Server, now: i64, keys: &Keys) {
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
            Stored::Hash(h) => Value::Hash(h.iter().cloned().collect()),
        };
        server.put(k, value, *at);
    }
}

/// Reads the server's live keys back; `Err` names a key of a type no
/// model's scripts write, or a score that is not a whole number of ms (the
/// model sent what the library does not).
pub fn store(server: &Server) -> Result<Keys, String> {
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
            Value::Hash(h) => Stored::Hash(h.into_iter().collect()),
            other => return Err(format!("{} holds a {}", name(), other.type_name())),
        };
        keys.insert(k, (v, e.expires_at));
    }
    Ok(keys)
}

/// The value of `key` in `keys`.
pub fn get<'a>(keys: &'a Keys, key: &[u8]) -> Option<&'a Stored> {
    keys.get(key).map(|(v, _)| v)
}

/// A field of the hash at `key`, as an integer.
pub fn field(keys: &Keys, key: &[u8], name: &[u8]) -> Option<i64> {
    match get(keys, key)? {
        Stored::Hash(h) => h
            .iter()
            .find(|(f, _)| f == name)
            .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok()),
        _ => None,
    }
}

/// The sorted set at `key`'s members whose score is above `now_ms` (server
/// ms): those the scripts count as live (they prune scores up to now).
pub fn live_members(keys: &Keys, key: &[u8], now_ms: i64) -> Vec<Vec<u8>> {
    match get(keys, key) {
        Some(Stored::ZSet(z)) => z
            .iter()
            .filter(|(_, score)| **score > now_ms)
            .map(|(m, _)| m.clone())
            .collect(),
        _ => Vec::new(),
    }
}

/// The scores above `now_ms` of the sorted set at `key`, lowest first.
pub fn live_scores(keys: &Keys, key: &[u8], now_ms: i64) -> Vec<i64> {
    let mut scores: Vec<i64> = match get(keys, key) {
        Some(Stored::ZSet(z)) => z.values().copied().filter(|s| *s > now_ms).collect(),
        _ => Vec::new(),
    };
    scores.sort_unstable();
    scores
}

/// The set at `key`'s members.
pub fn set_members(keys: &Keys, key: &[u8]) -> BTreeSet<Vec<u8>> {
    match get(keys, key) {
        Some(Stored::Set(s)) => s.clone(),
        _ => BTreeSet::new(),
    }
}

/// The server's clock in ms for the model's time `now`, as scripts read it.
pub fn server_ms(now: i64) -> i64 {
    START_MICROS / 1000 + now
}
