mod cluster;
mod cluster_failover;
mod cluster_failover_primitives;
mod matrix;
mod sentinel;
mod sentinel_tls;
mod tls;
mod tls_server_name;
