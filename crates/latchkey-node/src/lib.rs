//! latchkey for Node.js: the native layer (`latchkey-node.linux-x64-gnu.node`)
//! that lib/ (the package's JavaScript facade, with its `.d.ts`) wraps. Not
//! imported by users: the facade adds what napi-rs cannot express (an
//! AbortSignal on every wait, `Symbol.asyncDispose`, error classes).
//!
//! Every hold is one `latchkey::Kept` (a `Box<dyn latchkey::Guard>` its
//! client keeps) behind one class (hold.rs); what can be acquired is one
//! trait (acquire.rs); the client and its factories are in client.rs, the
//! other primitives in primitives.rs, the iterators in signals.rs.
//! Promises run the library's futures on the package's own tokio runtime
//! (executor.rs) and are settled by napi-rs (runtime.rs); the lost
//! notification is a weak thread-safe function, so it never keeps a
//! process alive. The library's client keeps every hold
//! (`latchkey::Client::keep`) until it is released or forgotten, lost, or
//! given back by the client's close, which is also what its environment's
//! end calls (core.rs, envs.rs).

// napi-derive registers the exports only outside `cfg(test)`: clippy's
// test build of the lib (`--all-targets`) would see every one of them as
// dead code.
#![cfg_attr(test, allow(dead_code))]

mod acquire;
mod args;
mod client;
mod core;
mod envs;
mod errors;
mod executor;
mod hold;
mod kinds;
mod primitives;
mod runtime;
mod signals;

use napi_derive::napi;

/// The version of the Rust library the package was built from.
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// The bounds the library enforces, for the facade's own checks.
#[napi(object)]
pub struct Limits {
    pub min_ttl_ms: f64,
    pub max_ttl_ms: f64,
    pub max_name_len: u32,
}

#[napi]
pub fn limits() -> Limits {
    Limits {
        min_ttl_ms: latchkey::limits::MIN_TTL.as_secs_f64() * 1000.0,
        max_ttl_ms: latchkey::limits::MAX_TTL.as_secs_f64() * 1000.0,
        max_name_len: latchkey::limits::MAX_NAME_LEN as u32,
    }
}
