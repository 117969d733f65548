//! Executable models of latchkey's protocol, run against the simulated
//! server with the library's real scripts, and the explorers that search
//! them for broken invariants.
//!
//! So far the plain lock with fencing ([`lock`]): its client side as a
//! state machine (attempt, wait, renew, issue a fencing token, write to a
//! fenced resource, release), time and faults as transitions, and the
//! invariants of exclusion and fencing checked after every step.
//!
//! And the fair lock ([`fair`]: `fair_model.rs` what is enabled when,
//! `fair_step.rs` the transitions,
//! `fair_client.rs` a client's steps, `fair_check.rs` the invariants): a
//! first try, queueing and lease renewal (`fair_acquire.lua`), the
//! hand-off message or a renewal finding the hand-off, the watchdog and
//! the hand-off's extension, a release handing on (`fair_release.lua`), a
//! waiter leaving (`fair_leave.lua`), an operator's revocation
//! (`fair_revoke.lua`); checked for exclusion, fencing (strictly rising
//! tokens, every later one above a revocation's fence), FIFO among
//! waiters that kept their leases, and the delay a dead waiter can cause.

pub mod explore;
pub mod fair;
mod fair_check;
mod fair_client;
mod fair_model;
mod fair_step;
pub mod lock;
mod lock_step;
pub mod trace;

pub use fair_step::replay as replay_fair;
pub use lock_step::replay;
