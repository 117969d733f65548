//! The rounds of the Redlock algorithm: each sends one command to every
//! instance at once (each bounded by the per-instance timeout; see
//! `gather.rs` for when a round stops waiting) and counts the answers; what
//! the answers mean is decided in `tally.rs`. The per-instance commands are
//! the single-instance ones of
//! `single.rs`; only the fence raise is Redlock's own.
//!
//! ```text
//! acquire:  start ─► SET NX on all ─► majority? ─► raise fences (with_fencing, Strict) ─► now < start + ttl − drift?
//!                                     │ no                                                │ no
//!                                     └──────── retract on all ◄──────────────────────────┘  → Busy / NoQuorum
//!
//! issue:    issue_fence.lua on all ─► majority holds our key? ─► raise fences (Strict) ─► now < deadline?
//!                                     │ no → NotHeld / NoQuorum                           │ no → NotHeld
//! (issue: the first `fencing_token()` of a guard whose lock is not `with_fencing`)
//! ```
//!
//! One file per kind of round, each readable on its own: `acquire.rs` (the
//! acquire round and the retraction of a failed attempt), `owner.rs` (the
//! rounds only the holder may run: extend, release), `fence.rs` (fencing
//! tokens: issuing them and raising the counters), `wake.rs` (the release
//! subscriptions of waiters). This file holds what they share.

use crate::backend::redlock::Group;
use crate::vocab::error::Error;

mod acquire;
mod fence;
mod owner;
mod wake;

impl Group {
    fn all(&self) -> std::ops::Range<usize> {
        0..self.inner.instances.len()
    }

    fn no_quorum(&self, op: &'static str, answered: usize) -> Error {
        Error::NoQuorum {
            op,
            answered,
            needed: self.inner.quorum,
            instances: self.inner.instances.len(),
        }
    }
}
