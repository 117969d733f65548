//! Layer 4, primitives: locks (plain and fair), semaphores, read-write
//! locks, latches, barriers, fencing, elections and signals, each over the
//! session, the backends and the lease. See `ARCHITECTURE.md`.

#[macro_use]
pub(crate) mod lease;

pub(crate) mod acquire;
pub(crate) mod barrier;
pub(crate) mod builder;
pub(crate) mod control;
pub(crate) mod election;
pub(crate) mod fence;
pub(crate) mod guard;
pub(crate) mod inspect;
pub(crate) mod latch;
pub(crate) mod lock;
pub(crate) mod multi;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
pub(crate) mod shared;
mod shown;
pub(crate) mod signal;
pub(crate) mod traced;
pub(crate) mod wait;
