//! The command's tests, one binary (as cargo's own `tests/testsuite`): each
//! runs the built `latchkey` against redis-server(s) the test kit starts,
//! never a mock, never port 6379. One file per command or concern; run one
//! with a filter: `cargo test -p latchkey-cli --test suite run_ends::`.

mod common;

mod acl;
mod cluster;
mod cluster_failover;
mod control;
mod demo;
mod docs_examples;
mod doctor;
mod doctor_managed;
mod doctor_users;
mod elect;
mod exporter;
mod fair;
mod help;
mod input;
mod inspect;
mod inspect_kinds;
mod latch;
mod permits;
mod redlock;
mod revoke;
mod run;
mod run_ends;
mod run_faults;
mod run_multi;
mod sentinel;
mod servers;
mod signal_wait;
mod supervise;
mod tls;
mod tokens;
mod top;
mod torture;
mod torture_election;
mod torture_primitives;
mod usage_messages;
