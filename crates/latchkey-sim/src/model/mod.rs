//! Executable models of latchkey's protocol, run against the simulated
//! server with the library's real scripts, and the explorers that search
//! them for broken invariants.
//!
//! So far the plain lock with fencing ([`lock`]): its client side as a
//! state machine (attempt, wait, renew, issue a fencing token, write to a
//! fenced resource, release), time and faults as transitions, and the
//! invariants of exclusion and fencing checked after every step.

pub mod explore;
pub mod fair;
mod fair_check;
mod fair_client;
mod fair_step;
pub mod lock;
mod lock_step;
pub mod trace;

pub use fair_step::replay as replay_fair;
pub use lock_step::replay;
