//! Executable models of latchkey's protocol, run against the simulated
//! server with the library's real scripts, and the explorers that search
//! them for broken invariants.
//!
//! The plain lock with fencing ([`lock`]): its client side as a
//! state machine (attempt, wait, renew, issue a fencing token, write to a
//! fenced resource, release), time and faults as transitions, and the
//! invariants of exclusion and fencing checked after every step.
//!
//! The election ([`elect`]: campaign, wait for a vacancy, renew, proclaim,
//! resign; one leader per term, terms strictly increasing), the latch and
//! the barrier ([`latch`], [`barrier`]: counts and generations as
//! documented), and signals ([`signal`]: `signal_one.lua` hands a signal to
//! at most one waiter of the name, a broadcast reaches every one), over
//! the keyspace snapshot they share ([`snap`]).

pub mod barrier;
mod barrier_step;
pub mod elect;
mod elect_step;
pub mod explore;
pub mod latch;
pub mod lock;
mod lock_step;
pub mod signal;
pub mod snap;
pub mod trace;

pub use lock_step::replay;
