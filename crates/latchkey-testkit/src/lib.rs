//! Test support for latchkey: real `redis-server` processes and a
//! fault-injecting TCP proxy, for integration tests and benchmarks.
//!
//! Nothing here is a mock. [`RedisServer`] runs a private `redis-server`
//! (which must be on `PATH`; `apt-get install redis-server`; or the server
//! `LATCHKEY_TEST_SERVER` names: Redis 8.2, Valkey 8.1 or 9.1, a path; see
//! [`ServerProgram`]) on a free
//! loopback port with its own data directory, and lets a test crash, stop,
//! restart, pause and resume it, or make it a replica or AOF-persistent.
//! [`Proxy`] sits between a client and a server and can delay, blackhole or
//! reset the traffic, to simulate a slow or partitioned network.
//! [`RedisCluster`] runs a private Redis Cluster (3 primaries, each with a
//! replica, or another shape) of such servers, joined with `redis-cli
//! --cluster create`, and can fail a primary over to its replica or move a
//! hash slot, keys included, to another primary.
//! [`ServerBuilder::tls`] and [`ClusterBuilder::tls`] make them serve TLS
//! only (`--tls-port`, `--port 0`), with a CA, server and client
//! certificates made at test time by [`TlsCerts::generate`] (feature `tls`).
//! [`SentinelSet`] runs a primary, its replica and three Sentinels that
//! fail it over (on request, or when the primary is killed);
//! [`SentinelBuilder::tls`] (feature `tls`) makes its primary and replicas
//! serve and replicate over TLS only, the Sentinels still reached plainly
//! by clients (they reach the data nodes, and each other, over TLS).
//!
//! Servers never outlive the test that started them: they are killed on drop
//! (also when the test panics), and on Linux also when the test process itself
//! is killed, via `PR_SET_PDEATHSIG`. Failures to start panic (or, with
//! [`ServerBuilder::try_start`], return an error) with the reason and the tail
//! of the server's log.
//!
//! Unix only: servers are controlled with signals.
//!
//! # Example
//!
//! ```
//! use latchkey_testkit::RedisServer;
//!
//! // An AOF server keeps acknowledged writes across a crash and restart.
//! let mut redis = RedisServer::builder().aof(true).start();
//! redis.command(&["SET", "fence", "7"]).unwrap();
//! redis.kill();
//! assert!(!redis.is_running());
//! redis.restart();
//! assert_eq!(redis.command(&["GET", "fence"]).unwrap(), "7");
//!
//! // A client under test connects with `redis.url()`, e.g. "redis://127.0.0.1:40123/".
//! assert!(redis.url().ends_with(&format!(":{}/", redis.port())));
//! ```
//!
//! See [`Proxy`] for network faults. For what happens on its own, wait with
//! [`eventually`] (polled, bounded by [`PATIENCE`]) and count what the server
//! saw with [`RedisServer::command_calls`] and [`RedisServer::subscribers`]
//! rather than sleeping.

#![warn(missing_docs)]

#[cfg(not(unix))]
compile_error!("latchkey-testkit needs Unix: it controls redis-server with signals");

mod choice;
mod cluster;
mod ports;
mod proxy;
mod resp;
mod sentinel;
mod server;
mod spawn;
mod stats;
mod tls;
mod wait;

pub use choice::{servers_required, ServerProgram, SERVERS_DIR_VAR, SERVER_VAR};
pub use cluster::{key_slot, ClusterBuilder, ClusterNode, NodeRole, RedisCluster, SLOTS};
pub use ports::{free_cluster_port, free_port};
pub use proxy::{Proxy, ProxyMode};
pub use sentinel::{SentinelBuilder, SentinelSet};
pub use server::{RedisServer, ServerBuilder};
pub use tls::{ClientAuth, TlsCerts};
pub use wait::{eventually, eventually_blocking, Check, PATIENCE};
