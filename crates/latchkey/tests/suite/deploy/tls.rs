//! `rediss://`: locks, the watchdog, waiting and signals over TLS (with and
//! without client certificates), and every way TLS can be refused, each a
//! clear `Error::Tls` (or bad input for a file that is not there).
//!
//! The servers serve TLS only (`--port 0`): nothing here can pass over a
//! plain connection.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::{Client, ClientBuilder, Error, Ownership, Redlock};
use latchkey_testkit::{ClientAuth, TlsCerts};

/// The test options (as `common::client`), over TLS with `certs`' CA and,
/// if `mutual`, its client certificate.
fn builder(url: &str, certs: &TlsCerts, mutual: bool) -> ClientBuilder {
    let builder = Client::builder(url)
        .prefix("test:")
        .command_timeout(Duration::from_millis(1000))
        .pubsub_ping_every(Duration::from_millis(200))
        .tls_ca_file(certs.ca());
    if mutual {
        builder.tls_client_cert_files(certs.client_cert(), certs.client_key())
    } else {
        builder
    }
}

async fn tls_client(server: &RedisServer, certs: &TlsCerts, mutual: bool) -> Client {
    builder(&server.url(), certs, mutual)
        .connect()
        .await
        .expect("connect over TLS")
}

#[tokio::test]
async fn locks_waiting_and_signals_work_over_tls_with_a_custom_ca() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    assert!(server.url().starts_with("rediss://"));
    let a = tls_client(&server, &certs, false).await;
    let b = tls_client(&server, &certs, false).await;
    core_paths(&server, &a, &b, "tls-core").await;
}

#[tokio::test]
async fn locks_waiting_and_signals_work_over_mutual_tls() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    let a = tls_client(&server, &certs, true).await;
    let b = tls_client(&server, &certs, true).await;
    core_paths(&server, &a, &b, "tls-core").await;
}

#[tokio::test]
async fn pem_bytes_work_as_files_do() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    let client = Client::builder(&server.url())
        .tls_ca_pem(certs.read(&certs.ca()))
        .tls_client_cert_pem(
            certs.read(&certs.client_cert()),
            certs.read(&certs.client_key()),
        )
        .connect()
        .await
        .expect("connect with PEM bytes");
    let guard = client
        .lock("pem", Duration::from_secs(5))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free lock");
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn the_watchdog_renews_over_mutual_tls() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    let client = tls_client(&server, &certs, true).await;
    let ttl = Duration::from_secs(1);
    let lock = client.lock("tls-kept", ttl).unwrap().with_watchdog();
    let guard = lock.try_acquire().await.unwrap().expect("free lock");
    // Three TTLs: without renewals over TLS the key would be gone.
    tokio::select! {
        _ = guard.lost() => panic!("lost a lock the watchdog should keep"),
        _ = tokio::time::sleep(ttl * 3) => {}
    }
    assert_eq!(
        server.command(&["GET", "test:tls-kept"]).unwrap(),
        guard.token()
    );
    assert!(lock.try_acquire().await.unwrap().is_none());
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn the_watchdog_reports_a_lost_lock_over_tls() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    let client = tls_client(&server, &certs, false).await;
    let guard = client
        .lock("tls-lost", Duration::from_secs(1))
        .unwrap()
        .with_watchdog()
        .try_acquire()
        .await
        .unwrap()
        .expect("free lock");
    server.command(&["DEL", "test:tls-lost"]).unwrap();
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost() never fired");
    assert!(!guard.is_held());
}

#[tokio::test]
async fn redlock_takes_the_same_tls_options() {
    let certs = TlsCerts::generate();
    let servers: Vec<RedisServer> = (0..3)
        .map(|_| {
            RedisServer::builder()
                .tls(&certs, ClientAuth::Required)
                .start()
        })
        .collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let redlock = Redlock::connect_with(&urls, |b| {
        b.prefix("test:")
            .tls_ca_file(certs.ca())
            .tls_client_cert_files(certs.client_cert(), certs.client_key())
    })
    .await
    .expect("Redlock over TLS");
    assert_eq!(redlock.connected(), 3);
    let guard = redlock
        .lock("tls-redlock", Duration::from_secs(5))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free lock");
    // The acquire returns at a majority; the last instance's request runs
    // on in its own task, so it is waited for.
    for server in &servers {
        latchkey_testkit::eventually("every instance holds the lock", || async {
            server.command(&["GET", "test:tls-redlock"]).unwrap() == guard.token()
        })
        .await;
    }
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

/// The reason of a TLS error, or a panic naming what came instead.
fn tls_reason(result: latchkey::Result<Client>) -> String {
    match result {
        Err(Error::Tls { reason }) => reason,
        Err(other) => panic!("expected a TLS error, got {other:?}"),
        Ok(_) => panic!("expected a TLS error, got a connection"),
    }
}

#[tokio::test]
async fn a_server_certificate_from_an_unknown_ca_is_refused() {
    let certs = TlsCerts::generate();
    let stranger = TlsCerts::generate();
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    let result = builder(&server.url(), &stranger, false).connect().await;
    let reason = tls_reason(result);
    assert!(reason.contains("not signed by a CA we trust"), "{reason}");
    assert!(reason.contains("UnknownIssuer"), "{reason}");
    // Not a network hiccup: retrying cannot help.
    let err = Error::Tls { reason };
    assert!(!err.is_transient());
    assert!(err.to_string().starts_with("TLS failed: "), "{err}");
}

#[tokio::test]
async fn the_system_cas_do_not_trust_a_private_ca() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    let result = Client::builder(&server.url()).connect().await;
    let reason = tls_reason(result);
    assert!(reason.contains("unknown issuer"), "{reason}");
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused_by_mutual_tls() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    let result = builder(&server.url(), &certs, false).connect().await;
    let reason = tls_reason(result);
    assert!(reason.contains("requires a client certificate"), "{reason}");
}

#[tokio::test]
async fn a_client_certificate_from_an_unknown_ca_is_refused() {
    let certs = TlsCerts::generate();
    let stranger = TlsCerts::generate();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Optional)
        .start();
    let result = Client::builder(&server.url())
        .tls_ca_file(certs.ca())
        .tls_client_cert_files(stranger.client_cert(), stranger.client_key())
        .connect()
        .await;
    let reason = tls_reason(result);
    assert!(
        reason.contains("refused our client certificate"),
        "{reason}"
    );
    assert!(reason.contains("UnknownCA"), "{reason}");
}

#[tokio::test]
async fn optional_client_auth_lets_a_client_without_a_certificate_in() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Optional)
        .start();
    let client = tls_client(&server, &certs, false).await;
    assert_eq!(client.signal("nobody", b"x").await.unwrap(), 0);
}

/// A plain redis-server takes the TLS hello for the start of an inline
/// command and waits for its end: the handshake never completes, and the
/// connection times out (it does not hang).
#[tokio::test]
async fn tls_to_a_plain_port_times_out() {
    let certs = TlsCerts::generate();
    let plain = RedisServer::start();
    let url = format!("rediss://127.0.0.1:{}/", plain.port());
    let result = builder(&url, &certs, false).connect().await;
    assert!(
        matches!(result, Err(Error::Timeout { op: "connect", .. })),
        "{:?}",
        result.map(|_| ())
    );
}

/// The other way round, the TLS server drops the plain client.
#[tokio::test]
async fn plain_redis_to_a_tls_port_is_refused() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    let url = format!("redis://127.0.0.1:{}/", server.port());
    let result = Client::builder(&url)
        .command_timeout(Duration::from_millis(1000))
        .connect()
        .await;
    assert!(
        matches!(result, Err(Error::Unreachable(_) | Error::Timeout { .. })),
        "{:?}",
        result.map(|_| ())
    );
}

#[tokio::test]
async fn a_missing_certificate_file_is_bad_input() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    let missing = certs.dir().join("no-such-ca.pem");
    let result = Client::builder(&server.url())
        .tls_ca_file(&missing)
        .connect()
        .await;
    match result {
        Err(Error::InvalidInput(why)) => {
            assert!(why.contains("no-such-ca.pem"), "{why}")
        }
        other => panic!("expected bad input, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn a_file_without_a_certificate_is_a_tls_error() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder().tls(&certs, ClientAuth::No).start();
    // A key where the CA should be.
    let result = Client::builder(&server.url())
        .tls_ca_file(certs.client_key())
        .connect()
        .await;
    let reason = tls_reason(result);
    assert!(reason.contains("holds no PEM certificate"), "{reason}");
}

#[tokio::test]
async fn a_key_of_another_certificate_is_refused_before_connecting() {
    let certs = TlsCerts::generate();
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    let result = Client::builder(&server.url())
        .tls_ca_file(certs.ca())
        .tls_client_cert_files(certs.client_cert(), certs.server_key())
        .connect()
        .await;
    let reason = tls_reason(result);
    assert!(reason.contains("do not belong together"), "{reason}");
}

#[tokio::test]
async fn tls_options_need_a_rediss_url() {
    let certs = TlsCerts::generate();
    let result = Client::builder("redis://127.0.0.1:1/")
        .tls_ca_file(certs.ca())
        .connect()
        .await;
    match result {
        Err(Error::InvalidInput(why)) => assert!(why.contains("rediss://"), "{why}"),
        other => panic!("expected bad input, got {:?}", other.map(|_| ())),
    }
}

/// A Redis Cluster whose nodes (bus and all) speak mutual TLS only: the
/// client finds it is a cluster and reaches every primary with the same
/// certificates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_mutual_tls() {
    let certs = TlsCerts::generate();
    let cluster = tls_cluster(&certs).await;
    let seed = cluster.seed_url();
    assert!(seed.starts_with("rediss://"), "{seed}");
    let client = builder(&seed, &certs, true)
        .connect()
        .await
        .expect("connect to the TLS cluster");
    assert!(client.connection().is_cluster());
    // Locks whose slots cover every primary, each with a fencing token.
    let mut primaries = std::collections::HashSet::new();
    for i in 0..30 {
        let name = format!("tls-cluster-{i}");
        let node = cluster.primary_for_key(format!("test:{name}")).addr();
        let guard = client
            .lock(&name, Duration::from_secs(10))
            .unwrap()
            .with_fencing()
            .try_acquire()
            .await
            .unwrap()
            .expect("free lock");
        assert!(guard.fencing_token().await.unwrap() > 0);
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
        primaries.insert(node);
    }
    assert_eq!(primaries.len(), 3, "every primary served a lock");
    // The sharded subscriber connects with the same certificates: a
    // waiter on another client is woken by the release.
    let other = builder(&seed, &certs, true).connect().await.unwrap();
    let held = client
        .lock("tls-cluster-wake", Duration::from_secs(30))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let lock = other
        .lock("tls-cluster-wake", Duration::from_secs(30))
        .unwrap();
    let waiting = tokio::spawn(async move { lock.acquire_until(Duration::from_secs(20)).await });
    let key = "test:tls-cluster-wake";
    let channel = String::from_utf8(latchkey::protocol::release_channel(key.as_bytes())).unwrap();
    latchkey_testkit::eventually("the waiter subscribed at the lock's node", || async {
        cluster
            .primary_for_key(key)
            .server()
            .shard_subscribers(&channel)
            == 1
    })
    .await;
    let released = std::time::Instant::now();
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let got = waiting.await.unwrap().expect("woken");
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "not woken by the release"
    );
    assert_eq!(got.release().await.unwrap(), Ownership::Owned);
}

/// A `rediss://` replica gets the client's TLS options: a signal listener
/// subscribes there too, with the client certificate.
#[tokio::test]
async fn a_tls_replica_gets_the_same_options() {
    let certs = TlsCerts::generate();
    let primary = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    let replica = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .arg("tls-replication", "yes")
        .replica_of(primary.port())
        .start();
    let client = builder(&primary.url(), &certs, true)
        .replica(&replica.url())
        .connect()
        .await
        .expect("connect over TLS");
    let _listener = client.listen(["tls-replicated"]).await.unwrap();
    // Each server's subscription is made by its own connection, in its own
    // time: wait for both.
    eventually("the listener subscribed on the replica too", || async {
        replica.subscribers("test:signal:tls-replicated") == 1
    })
    .await;
    eventually("the listener subscribed on the primary", || async {
        primary.subscribers("test:signal:tls-replicated") == 1
    })
    .await;
}
