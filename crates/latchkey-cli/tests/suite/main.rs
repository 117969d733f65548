//! The command's tests, one binary (as cargo's own `tests/testsuite`): each
//! runs the built `latchkey` against redis-server(s) the test kit starts,
//! never a mock, never port 6379. One file per command or concern, in
//! families that follow `src/commands/`:
//!
//! * `run`: holds (`run` and its ends, faults, `--and`, supervision,
//!   `--fair`, `--permits`; `acquire`/`release`/`extend`);
//! * `prim`: latches and barriers, elections, signals, revocation and
//!   release requests;
//! * `doctor`: `doctor` and ACL users;
//! * `deploy`: Cluster, Sentinel, TLS, Redlock, refused servers;
//! * `inspect`: `status`, `list`, the exporter, `top`;
//! * `torture`: `latchkey torture`'s workloads;
//! * `surface`: help, bad input, usage messages, the docs' examples, `demo`;
//! * `doors`: `latchkey mcp`, driven by a real MCP session.
//!
//! Run one family or file with a filter: `cargo test -p latchkey-cli --test
//! suite run::ends::` (a filter is a substring: `run::` is the whole family).

mod common;

mod deploy;
mod doctor;
mod doors;
mod inspect;
mod prim;
mod run;
mod surface;
mod torture;
