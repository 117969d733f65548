//! A deterministic simulated Redis that runs latchkey's Lua scripts
//! unchanged (the text `latchkey::protocol::script_text` returns, which is
//! what the library sends), for checking the protocol without a server.
//!
//! [`Server`] holds a keyspace of strings, hashes, lists, sets and sorted
//! sets with millisecond expiry judged by a simulated clock that moves only
//! when told to ([`Server::set_micros`], [`Server::advance_ms`]); `TIME`
//! answers from it. [`Server::eval`] runs a script in an embedded Lua 5.1
//! (the version Redis embeds) with Redis's `redis.call`/`redis.pcall`, its
//! Lua↔reply conversions and error messages; [`Server::command`] runs one
//! command as a client would. Published messages wait in an outbox
//! ([`Server::take_published`]). Nothing reads the wall clock, and nothing
//! is random.
//!
//! [`model`] holds executable models of the protocol's client side that
//! call the real scripts on this server, and the explorers that search them
//! (an exhaustive BFS of bounded configurations, seeded random walks),
//! checking their invariants after every step: the plain lock with
//! fencing, the fair lock (with revocation), several locks at once, a lock
//! held while idle, request-release, the semaphore with holds of k
//! permits, the read-write lock, the election, the latch, the barrier and
//! signals; see docs/reliability.md, "Model checking the protocol".
//! The conformance check (`tests/conformance.rs`, [`model::conform`])
//! asserts that the models send what the real library sends a real server.
//!
//! Only the commands latchkey's scripts call (and a few clients use to
//! make odd states) are here: see `commands/mod.rs` for the list. The
//! differential test (`tests/differential.rs`) runs seeded steps of every
//! script and of plain commands against the simulator and a real
//! `redis-server` (Redis 7.0, 8.2, Valkey 8.1, 9.1) and compares replies,
//! keyspaces and published messages after each.
//!
//! Not simulated, as no script needs it: a Lua `pcall` around
//! `redis.call` catches an error value that is not Redis's `{err = …}`
//! table (`redis.pcall` does return that table); `cjson`, `cmsgpack`,
//! `bit`, `struct`, `redis.setresp` and `redis.set_repl`; `ZRANGE`'s
//! `BYSCORE`/`BYLEX`/`REV`/`LIMIT`; pattern subscribers other than as a
//! count `PUBLISH` adds; memory limits, script timeouts, replication.
//! Expiry at the exact millisecond (a key lives while the clock is not
//! past its expiry, as in Redis) is checked by the unit tests, not the
//! differential test, which keeps clear of deadlines (it cannot set a real
//! server's clock).

mod clock;
mod commands;
mod db;
mod keyspace;
mod lua;
pub mod model;
mod reply;
mod server;

pub use clock::Clock;
pub use db::Published;
pub use keyspace::{Entry, Value, ZSet};
pub use lua::sha1_hex;
pub use reply::{format_g17, Reply};
pub use server::Server;
