//! The Sentinel set: it forms, fails over on request and after a crash;
//! with plain TCP data nodes, and (feature `tls`) with TLS-only ones.
//!
//! The TLS test runs with `cargo test -p latchkey-testkit --features tls`.

use std::time::Instant;

use latchkey_testkit::SentinelSet;

#[test]
fn fails_over_on_request_and_after_a_crash() {
    fails_over(SentinelSet::start());
}

/// The data nodes serve TLS only and replicate over TLS; the Sentinels,
/// reached plainly, watch them over TLS (and each other: a failover after
/// a crash needs their votes).
#[cfg(feature = "tls")]
#[test]
fn a_tls_set_fails_over_on_request_and_after_a_crash() {
    use latchkey_testkit::{ClientAuth, TlsCerts};

    let certs = TlsCerts::generate();
    let set = SentinelSet::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    for server in set.servers() {
        assert!(server.url().starts_with("rediss://"), "{}", server.url());
        // TLS only: no plain port, replication over TLS.
        assert_eq!(
            server.command(&["CONFIG", "GET", "port"]).unwrap(),
            "port\n0"
        );
        assert_eq!(
            server
                .command(&["CONFIG", "GET", "tls-replication"])
                .unwrap(),
            "tls-replication\nyes"
        );
    }
    for sentinel in set.sentinels() {
        // Clients reach the Sentinels plainly.
        assert!(sentinel.url().starts_with("redis://"), "{}", sentinel.url());
        assert_eq!(sentinel.command(&["PING"]).unwrap(), "PONG");
    }
    fails_over(set);
}

fn fails_over(mut set: SentinelSet) {
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
