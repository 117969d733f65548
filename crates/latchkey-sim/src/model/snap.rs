//! What the models of the election, the latch, the barrier and the signals
//! share: a keyspace of strings and hashes kept as hashable data between
//! steps, the scripts' texts with a mutant's change, and reading replies.
//!
//! The plain lock's model keeps strings only (`lock_step.rs`); these
//! primitives also write hashes (the election's state, the barrier), so
//! their states keep this more general snapshot.

use std::collections::BTreeSet;

use latchkey::protocol::script_text;

use crate::keyspace::Value;
use crate::model::lock::START_MICROS;
use crate::reply::Reply;
use crate::server::Server;

/// A key's value as a model keeps it: the types these primitives write.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Val {
    /// A string.
    Str(Vec<u8>),
    /// A hash, its fields in order.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
}

/// The live keys: key, value, expiry (server ms).
pub type Keys = BTreeSet<(Vec<u8>, Val, Option<i64>)>;

/// Sets `server` to the model's time `now` (ms since the start) and `keys`.
pub fn load(server: &mut Server, now: i64, keys: &Keys) {
    server.flush();
    server.set_micros(START_MICROS + now * 1000);
    for (k, v, at) in keys {
        let value = match v {
            Val::Str(s) => Value::Str(s.clone()),
            Val::Hash(h) => Value::Hash(h.iter().cloned().collect()),
        };
        server.put(k, value, *at);
    }
}

/// The server's live keys; `Err` names a key of another type (the model
/// sent what the library does not).
pub fn store(server: &Server) -> Result<Keys, String> {
    let mut keys = Keys::new();
    for (k, e) in server.entries() {
        let v = match e.value {
            Value::Str(s) => Val::Str(s),
            Value::Hash(h) => Val::Hash(h.into_iter().collect()),
            other => {
                let key = String::from_utf8_lossy(&k).into_owned();
                return Err(format!("{key} holds a {}", other.type_name()));
            }
        };
        keys.insert((k, v, e.expires_at));
    }
    Ok(keys)
}

/// The value of `key` in `keys`.
pub fn get<'a>(keys: &'a Keys, key: &[u8]) -> Option<&'a Val> {
    keys.iter().find(|(k, _, _)| k == key).map(|(_, v, _)| v)
}

/// A field of the hash at `key`, as an integer.
pub fn field(keys: &Keys, key: &[u8], name: &[u8]) -> Option<i64> {
    match get(keys, key)? {
        Val::Hash(h) => h
            .iter()
            .find(|(f, _)| f == name)
            .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok()),
        Val::Str(_) => None,
    }
}

/// A script's text as the library sends it.
pub fn text(file: &str) -> Result<String, String> {
    script_text(file)
        .map(str::to_string)
        .ok_or_else(|| format!("no script {file}"))
}

/// `text` with `from` replaced by `to`; an error when `from` is not there,
/// so that a change of the script cannot turn a mutant into the original.
pub fn mutate(text: &str, from: &str, to: &str) -> Result<String, String> {
    if !text.contains(from) {
        return Err(format!("mutant: {from:?} is no longer in the script"));
    }
    Ok(text.replacen(from, to, 1))
}

/// A reply's integers (an integer, or an array's integer elements; others
/// read as `i64::MIN`).
pub fn ints(reply: &Reply) -> Vec<i64> {
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

/// A token of the library's shape (`lk2:`), unique per client and attempt.
pub fn token(client: usize, attempt: u32) -> String {
    format!("lk2:c{client}a{attempt}:0:sim")
}
