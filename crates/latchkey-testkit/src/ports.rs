//! Free loopback ports.

use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Mutex, OnceLock, PoisonError};

/// The port a developer's own Redis most likely listens on. Tests must never
/// talk to (let alone kill or flush) a server they did not start.
const DEFAULT_REDIS_PORT: u16 = 6379;

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
    static HANDED_OUT: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let handed_out = HANDED_OUT.get_or_init(Mutex::default);

    // The kernel spreads its picks over the whole ephemeral range, so a
    // handful of tries is plenty even after thousands of servers.
    for _ in 0..64 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap_or_else(|e| panic!("latchkey-testkit: cannot bind 127.0.0.1:0: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("latchkey-testkit: cannot read a bound port: {e}"))
            .port();
        if port == DEFAULT_REDIS_PORT {
            continue;
        }
        // A panicking test must not take the port registry down with it.
        let mut handed_out = handed_out.lock().unwrap_or_else(PoisonError::into_inner);
        if handed_out.insert(port) {
            return port;
        }
    }
    panic!("latchkey-testkit: the kernel keeps returning loopback ports that are already in use");
}
