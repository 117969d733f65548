//! The Sentinel set: it forms, fails over on request and after a crash.

use std::time::Instant;

use latchkey_testkit::SentinelSet;

#[test]
fn fails_over_on_request_and_after_a_crash() {
    let mut set = SentinelSet::start();
    assert_eq!(set.sentinel_addrs().len(), 3);
    let first = set.primary_port();
    set.server(first).command(&["SET", "k", "v"]).unwrap();
    set.wait_replicas_synced();

    let second = set.failover();
    assert_ne!(second, first);
    assert_eq!(set.server(second).command(&["GET", "k"]).unwrap(), "v");
    // The old primary becomes a replica of the new one (Sentinel waits a
    // few seconds before it reconfigures a primary that is still running).
    set.wait_replicas_synced();
    set.server(second).command(&["SET", "k", "w"]).unwrap();
    set.wait_replicas_synced();

    let started = Instant::now();
    let third = set.kill_primary();
    assert_eq!(third, first, "the one replica is promoted");
    assert!(!set.server(second).is_running());
    assert_eq!(set.server(third).command(&["GET", "k"]).unwrap(), "w");
    eprintln!("kill -9 failover announced after {:?}", started.elapsed());
}
