//! The simulated server: its state and a Lua engine to run scripts with.

use crate::commands;
use crate::db::{Db, Published};
use crate::keyspace::Value;
use crate::lua::Engine;
use crate::reply::Reply;

/// A simulated Redis. Cloning copies the state (keys, clock, subscribers,
/// outbox); the clone makes its own Lua state when it first runs a script.
pub struct Server {
    db: Db,
    engine: Option<Engine>,
}

impl Clone for Server {
    fn clone(&self) -> Server {
        Server {
            db: self.db.clone(),
            engine: None,
        }
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("db", &self.db).finish()
    }
}

impl Server {
    /// An empty server whose clock reads `micros` µs since the epoch.
    pub fn new(micros: i64) -> Server {
        Server {
            db: Db::new(micros),
            engine: None,
        }
    }

    /// The clock, in µs.
    pub fn micros(&self) -> i64 {
        self.db.clock.micros()
    }

    /// The clock, in ms.
    pub fn millis(&self) -> i64 {
        self.db.clock.millis()
    }

    /// Sets the clock (keys past their expiry are gone from then on).
    pub fn set_micros(&mut self, micros: i64) {
        self.db.clock.set_micros(micros);
    }

    /// Moves the clock `ms` milliseconds on.
    pub fn advance_ms(&mut self, ms: i64) {
        self.db.clock.advance_ms(ms);
    }

    /// Runs one command (`args[0]` its name) as a client sends it.
    pub fn command<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        let words: Vec<Vec<u8>> = args.iter().map(|a| a.as_ref().to_vec()).collect();
        commands::run(&mut self.db, &words)
    }

    /// `EVAL script numkeys keys… args…`: runs `script` atomically at the
    /// clock's time, without rollback of the writes made before an error.
    pub fn eval<K: AsRef<[u8]>, A: AsRef<[u8]>>(
        &mut self,
        script: &str,
        keys: &[K],
        args: &[A],
    ) -> Reply {
        if self.engine.is_none() {
            match Engine::new() {
                Ok(engine) => self.engine = Some(engine),
                Err(e) => return Reply::error(format!("ERR latchkey-sim: no Lua state: {e}")),
            }
        }
        let Some(engine) = self.engine.as_mut() else {
            return Reply::error("ERR latchkey-sim: no Lua state");
        };
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.as_ref().to_vec()).collect();
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_ref().to_vec()).collect();
        engine.eval(&mut self.db, script, &keys, &args)
    }

    /// Every live key as `[key, type, value, expiry]`, in key order: the
    /// value as `Db::dump` says, the expiry in server ms (-1: none).
    pub fn dump(&self) -> Vec<Reply> {
        self.db.dump()
    }

    /// The messages published since the last call, oldest first.
    pub fn take_published(&mut self) -> Vec<Published> {
        std::mem::take(&mut self.db.outbox)
    }

    /// Declares `count` more (or, negative, fewer) subscribers of
    /// `channel` (sharded: of the shard channel), as `PUBLISH`'s reply and
    /// `PUBSUB` count them.
    pub fn subscribe(&mut self, channel: &[u8], sharded: bool, count: i64) {
        let table = if sharded {
            &mut self.db.shard_subscribers
        } else {
            &mut self.db.subscribers
        };
        let n = table.entry(channel.to_vec()).or_insert(0);
        *n += count;
        if *n <= 0 {
            table.remove(channel);
        }
    }

    /// Forgets every subscriber (of channels, shard channels and
    /// patterns): a model declares its clients' subscriptions anew for
    /// each step, from its state.
    pub fn unsubscribe_all(&mut self) {
        self.db.subscribers.clear();
        self.db.shard_subscribers.clear();
        self.db.patterns.clear();
    }

    /// Declares `count` more (or fewer) subscribers of the pattern
    /// `pattern` (`PSUBSCRIBE`): `PUBLISH` counts those that match.
    pub fn psubscribe(&mut self, pattern: &[u8], count: i64) {
        let n = self.db.patterns.entry(pattern.to_vec()).or_insert(0);
        *n += count;
        if *n <= 0 {
            self.db.patterns.remove(pattern);
        }
    }

    /// Sets `key` to `value`, expiring at `expires_at` (server ms), as
    /// a restore does: to start from a given state.
    pub fn put(&mut self, key: &[u8], value: Value, expires_at: Option<i64>) {
        self.db.keys.put(key, value, expires_at);
    }

    /// Every live key and its entry at the clock's time, in key order: what
    /// a model checker keeps of the keyspace between steps (and gives back
    /// with [`Server::flush`] and [`Server::put`]).
    pub fn entries(&self) -> Vec<(Vec<u8>, crate::keyspace::Entry)> {
        let now = self.db.now();
        self.db
            .keys
            .live(now)
            .map(|(k, e)| (k.to_vec(), e.clone()))
            .collect()
    }

    /// Wipes the keyspace, as a restart without persistence does.
    pub fn flush(&mut self) {
        self.db.keys.clear();
    }
}
