//! The library's integration tests, one binary (as cargo's own
//! `tests/testsuite`): each test links the crate and the test kit once, not
//! once per file. Every test starts its own redis-server(s) through the test
//! kit: never a mock, never port 6379.
//!
//! The families: `lock` (locks: plain, fair, fenced, Redlock, replicas, the
//! watchdog), `prim` (every other primitive), `deploy` (cluster, Sentinel,
//! TLS, and the matrix of every primitive on each), `cross` (what cuts
//! across: ACLs, messages, metrics, inspection, the layer rule; the spans
//! are a binary of their own, `tests/spans`: tracing's call-site cache is
//! shared by every thread of a process).
//! Run one family or file with a filter: `cargo test -p latchkey-redis --test
//! suite deploy::sentinel`.

mod common;
mod cross;
mod deploy;
mod lock;
mod prim;
