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
//! Only the commands latchkey's scripts call (and a few clients use to
//! make odd states) are here: see `commands/mod.rs` for the list. The
//! differential test (`tests/differential.rs`) runs the same steps against
//! a real `redis-server` and compares replies and keyspaces.

mod clock;
mod commands;
mod db;
mod keyspace;
mod lua;
mod reply;
mod server;

pub use clock::Clock;
pub use db::Published;
pub use keyspace::{Entry, Value, ZSet};
pub use lua::sha1_hex;
pub use reply::{format_g17, Reply};
pub use server::Server;
