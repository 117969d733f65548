//! Where the command runs: a Cluster (and its failover), Sentinel, TLS,
//! Redlock over several servers, and servers it refuses.

mod cluster;
mod cluster_failover;
mod redlock;
mod sentinel;
mod servers;
mod tls;
