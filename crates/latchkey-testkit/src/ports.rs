//! Free loopback ports.

use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Mutex, PoisonError};

/// The port a developer's own Redis most likely listens on. Tests must never
/// talk to (let alone kill or flush) a server they did not start.
const DEFAULT_REDIS_PORT: u16 = 6379;

/// Redis Cluster listens for its node-to-node bus on the client port plus
/// this offset (unless `cluster-port` says otherwise, which Redis 6.2 lacks).
pub const CLUSTER_BUS_OFFSET: u16 = 10_000;

/// The highest client port whose bus port still exists: 65535 - 10000.
const MAX_CLUSTER_PORT: u16 = u16::MAX - CLUSTER_BUS_OFFSET;

/// Tries of the kernel's pick before giving up. The kernel spreads its picks
/// over the whole ephemeral range, so a handful is plenty even after
/// thousands of servers; cluster ports reject about one pick in five (above
/// 55535), which 64 tries absorb easily.
const TRIES: usize = 64;

/// Every port handed out by this process, by [`free_port`] and
/// [`free_cluster_port`] alike (a cluster's bus port included), so that
/// neither can hand out a port the other already gave away.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Returns a loopback TCP port that was free a moment ago.
///
/// The kernel picks the port (we bind `127.0.0.1:0` and close the listener
/// again), so it is free *now*; another process may still take it before the
/// caller binds it. Anything that starts a server on it should therefore retry
/// on "address already in use", as [`RedisServer`](crate::RedisServer) does.
///
/// Within one process a port is never handed out twice, so parallel tests in
/// the same test binary cannot race each other for the same port. Port 6379 is
/// never returned.
///
/// # Panics
///
/// If the loopback interface cannot be bound at all.
pub fn free_port() -> u16 {
    for _ in 0..TRIES {
        let port = kernel_pick();
        if port != DEFAULT_REDIS_PORT && claim(&[port]) {
            return port;
        }
    }
    panic!("latchkey-testkit: the kernel keeps returning loopback ports that are already in use");
}

/// Returns a loopback port for a Redis Cluster node: the port *and* its bus
/// port (port + 10000) were both free a moment ago, so the port is at most
/// 55535.
///
/// The same rules as [`free_port`] apply to both ports: the kernel picks the
/// client port and we check the bus port by binding it, so both are free
/// *now* across processes (a launcher still retries on "address already in
/// use", as [`RedisCluster`](crate::RedisCluster) does); within one process
/// neither is ever handed out again, by this function or by [`free_port`].
/// Neither is ever 6379.
///
/// # Panics
///
/// If the loopback interface cannot be bound at all, or no pair is found.
pub fn free_cluster_port() -> u16 {
    for _ in 0..TRIES {
        let port = kernel_pick();
        if port > MAX_CLUSTER_PORT || port == DEFAULT_REDIS_PORT {
            continue;
        }
        let bus = port + CLUSTER_BUS_OFFSET;
        if bus == DEFAULT_REDIS_PORT || TcpListener::bind((Ipv4Addr::LOCALHOST, bus)).is_err() {
            continue;
        }
        if claim(&[port, bus]) {
            return port;
        }
    }
    panic!(
        "latchkey-testkit: found no loopback port <= {MAX_CLUSTER_PORT} with a free bus port \
         (port + {CLUSTER_BUS_OFFSET}) in {TRIES} tries"
    );
}

/// Binds `127.0.0.1:0`, closes the listener again and returns the port the
/// kernel chose.
fn kernel_pick() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap_or_else(|e| panic!("latchkey-testkit: cannot bind 127.0.0.1:0: {e}"))
        .local_addr()
        .unwrap_or_else(|e| panic!("latchkey-testkit: cannot read a bound port: {e}"))
        .port()
}

/// Records `ports` as handed out if none of them was; all or nothing.
fn claim(ports: &[u16]) -> bool {
    // A panicking test must not take the port registry down with it.
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    let handed_out = handed_out.get_or_insert_with(HashSet::new);
    if ports.iter().any(|p| handed_out.contains(p)) {
        return false;
    }
    handed_out.extend(ports);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ports_leave_room_for_a_free_bus_port_and_are_never_reused() {
        let ports: Vec<u16> = (0..20).map(|_| free_cluster_port()).collect();
        let mut seen = HashSet::new();
        for &port in &ports {
            assert!(port <= 55_535 && port != 6379, "bad cluster port {port}");
            assert!(seen.insert(port), "port {port} handed out twice");
            assert!(
                seen.insert(port + 10_000),
                "bus port of {port} handed out twice"
            );
        }
        // free_port knows about both the client and the bus ports.
        for _ in 0..200 {
            let port = free_port();
            assert!(
                !seen.contains(&port),
                "free_port returned cluster port {port}"
            );
        }
    }
}
