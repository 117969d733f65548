//! The test kit's own tests, one binary: the servers, clusters, Sentinels
//! and proxies it starts behave as the other crates' tests rely on.

mod cluster;
mod proxy;
mod sentinel;
mod server;
