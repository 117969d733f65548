//! Executable models of latchkey's protocol, run against the simulated
//! server with the library's real scripts, and the explorers that search
//! them for broken invariants.
//!
//! So far the plain lock with fencing ([`lock`]): its client side as a
//! state machine (attempt, wait, renew, issue a fencing token, write to a
//! fenced resource, release), time and faults as transitions, and the
//! invariants of exclusion and fencing checked after every step.
//!
//! Several names at once ([`multi`]): `lock_all` clients
//! (`multi_acquire.lua`, `multi_extend.lua`, `multi_release.lua`) beside
//! plain locks of the same names and keepers of holds kept while idle
//! (`CachedLock`, `cached.rs`), with exclusion per name, all or none (in
//! the clients' beliefs and in the keyspace), and a liveness bound: with
//! no fault, no waiter waits more than a tick while its names are free or
//! kept idle (no deadlock, no lost wake-up, a kept hold given back when
//! wanted, by a plain waiter or a `lock_all` one). Requests to release
//! (`Client::request_release`) arrive there as transitions too.

mod cached;
pub mod explore;
pub mod lock;
mod lock_step;
pub mod multi;
mod multi_check;
mod multi_scripts;
mod multi_step;
pub mod trace;

pub use lock_step::replay;
