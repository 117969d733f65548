//! Executable models of latchkey's protocol, run against the simulated
//! server with the library's real scripts, and the explorers that search
//! them for broken invariants.
//!
//! So far the plain lock with fencing ([`lock`]): its client side as a
//! state machine (attempt, wait, renew, issue a fencing token, write to a
//! fenced resource, release), time and faults as transitions, and the
//! invariants of exclusion and fencing checked after every step.
//!
//! The models are the protocol in executable form, and [`conform`] keeps
//! them honest: each says, per operation, what it sends (from the code its
//! steps send with), and `tests/conformance.rs` asserts that the real
//! library sends a real server the same scripts with the same argument
//! shapes. A new model plugs in as [`conform`]'s module docs say.

pub mod conform;
pub mod explore;
pub mod lock;
mod lock_request;
mod lock_step;
pub mod trace;

pub use lock_request::Request;
pub use lock_step::replay;
