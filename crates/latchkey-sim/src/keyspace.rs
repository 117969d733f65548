//! The keyspace: typed values under byte-string keys, each with an optional
//! expiry in server milliseconds. Ordered maps throughout, so that every
//! listing (a dump, `PUBSUB CHANNELS`) is deterministic.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A sorted set: member → score. Ordered views sort by (score, member),
/// as Redis orders a sorted set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZSet {
    scores: BTreeMap<Vec<u8>, f64>,
}

impl ZSet {
    /// The member's score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Sets `member`'s score; true when it is new.
    pub fn insert(&mut self, member: Vec<u8>, score: f64) -> bool {
        self.scores.insert(member, score).is_none()
    }

    /// Removes `member`; true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        self.scores.remove(member).is_some()
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// Whether it has no member.
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// Every (member, score), in Redis's order: by score, then member.
    pub fn ordered(&self) -> Vec<(&[u8], f64)> {
        let mut all: Vec<(&[u8], f64)> = self
            .scores
            .iter()
            .map(|(m, s)| (m.as_slice(), *s))
            .collect();
        all.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
        all
    }
}

/// A value of one of the types the scripts use.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string.
    Str(Vec<u8>),
    /// A hash.
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// A list.
    List(VecDeque<Vec<u8>>),
    /// A set.
    Set(BTreeSet<Vec<u8>>),
    /// A sorted set.
    ZSet(ZSet),
}

impl Value {
    /// The name `TYPE` answers.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    /// Whether an aggregate is empty (Redis deletes such a key).
    fn is_empty_aggregate(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
        }
    }
}

/// A key's value and its expiry (server ms; `None`: none).
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// When it expires: it is gone once the clock is past this instant.
    pub expires_at: Option<i64>,
}

/// The keys.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Keyspace {
    map: BTreeMap<Vec<u8>, Entry>,
}

impl Keyspace {
    /// Drops `key` if it expired by `now` (Redis: expired when now > when).
    fn expire_if_needed(&mut self, key: &[u8], now: i64) {
        let expired = self
            .map
            .get(key)
            .is_some_and(|e| e.expires_at.is_some_and(|when| now > when));
        if expired {
            self.map.remove(key);
        }
    }

    /// The live entry at `key`.
    pub fn get(&mut self, key: &[u8], now: i64) -> Option<&Entry> {
        self.expire_if_needed(key, now);
        self.map.get(key)
    }

    /// The live entry at `key`, to change.
    pub fn get_mut(&mut self, key: &[u8], now: i64) -> Option<&mut Entry> {
        self.expire_if_needed(key, now);
        self.map.get_mut(key)
    }

    /// Sets `key` to `value` with `expires_at`, whatever was there.
    pub fn put(&mut self, key: &[u8], value: Value, expires_at: Option<i64>) {
        self.map.insert(key.to_vec(), Entry { value, expires_at });
    }

    /// Removes `key`; true when it was live.
    pub fn remove(&mut self, key: &[u8], now: i64) -> bool {
        self.expire_if_needed(key, now);
        self.map.remove(key).is_some()
    }

    /// Deletes `key` if it holds an emptied aggregate, as Redis does after
    /// removing the last member.
    pub fn prune(&mut self, key: &[u8]) {
        if self
            .map
            .get(key)
            .is_some_and(|e| e.value.is_empty_aggregate())
        {
            self.map.remove(key);
        }
    }

    /// Every live key and entry at `now`, in key order.
    pub fn live(&self, now: i64) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.map
            .iter()
            .filter(move |(_, e)| e.expires_at.is_none_or(|when| now <= when))
            .map(|(k, e)| (k.as_slice(), e))
    }

    /// Removes everything (a restart without persistence).
    pub fn clear(&mut self) {
        self.map.clear();
    }
}
