//! The simulated server's state: the keyspace, the clock, the channels
//! subscribed to, and the outbox of messages published.

use std::collections::BTreeMap;

use crate::clock::Clock;
use crate::keyspace::{Keyspace, Value};
use crate::reply::{format_g17, Reply};

/// A message a command published.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Published {
    /// `PUBLISH` or `SPUBLISH`.
    pub sharded: bool,
    /// The channel.
    pub channel: Vec<u8>,
    /// The message.
    pub payload: Vec<u8>,
}

/// Everything a command reads or changes.
#[derive(Clone, Debug)]
pub struct Db {
    /// The keys.
    pub keys: Keyspace,
    /// The server's clock.
    pub clock: Clock,
    /// Subscribers per channel (`SUBSCRIBE`), as simulated clients declare them.
    pub subscribers: BTreeMap<Vec<u8>, i64>,
    /// Subscribers per shard channel (`SSUBSCRIBE`).
    pub shard_subscribers: BTreeMap<Vec<u8>, i64>,
    /// Subscribers per pattern (`PSUBSCRIBE`): `PUBLISH` counts them too.
    pub patterns: BTreeMap<Vec<u8>, i64>,
    /// Messages published, oldest first, until taken.
    pub outbox: Vec<Published>,
}

impl Db {
    /// An empty server whose clock reads `micros`.
    pub fn new(micros: i64) -> Db {
        Db {
            keys: Keyspace::default(),
            clock: Clock::at_micros(micros),
            subscribers: BTreeMap::new(),
            shard_subscribers: BTreeMap::new(),
            patterns: BTreeMap::new(),
            outbox: Vec::new(),
        }
    }

    /// The clock in ms, as expiry is judged.
    pub fn now(&self) -> i64 {
        self.clock.millis()
    }

    /// Every live key at the clock's time, in key order, as
    /// `[key, type, value, expiry]`: a string's bytes; a hash's fields and
    /// values, by field; a list's items; a set's members, sorted; a sorted
    /// set's members and scores, by score; the expiry in server ms, -1 for
    /// none (`PEXPIRETIME`). The differential test reads a real server into
    /// the same form.
    pub fn dump(&self) -> Vec<Reply> {
        let now = self.now();
        self.keys
            .live(now)
            .map(|(key, entry)| {
                let value = match &entry.value {
                    Value::Str(s) => Reply::bulk(s.clone()),
                    Value::Hash(h) => Reply::array(
                        h.iter()
                            .flat_map(|(f, v)| [Reply::bulk(f.clone()), Reply::bulk(v.clone())])
                            .collect(),
                    ),
                    Value::List(l) => Reply::array(l.iter().cloned().map(Reply::bulk).collect()),
                    Value::Set(s) => Reply::array(s.iter().cloned().map(Reply::bulk).collect()),
                    Value::ZSet(z) => Reply::array(
                        z.ordered()
                            .into_iter()
                            .flat_map(|(m, s)| [Reply::bulk(m), Reply::bulk(format_g17(s))])
                            .collect(),
                    ),
                };
                let expiry = entry.expires_at.unwrap_or(-1);
                Reply::array(vec![
                    Reply::bulk(key),
                    Reply::bulk(entry.value.type_name()),
                    value,
                    Reply::Int(expiry),
                ])
            })
            .collect()
    }
}
