//! The coordination commands besides holds: `latch` and `barrier`,
//! `elect` and `leader`, `signal` and `wait`, `revoke` and
//! `request-release`.

mod control;
mod elect;
mod latch;
mod revoke;
mod signal_wait;
