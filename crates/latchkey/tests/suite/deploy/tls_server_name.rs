//! The TLS server-name override (`ClientBuilder::tls_server_name`): a
//! server whose certificate carries only the DNS name `redis.test.invalid`
//! (not the loopback address it listens on) is refused by address, and
//! served under the override: locks, waiting (the subscriber), signals and replicas. A wrong name is refused,
//! bad names and a Redis Cluster are bad input.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::{Client, ClientBuilder, Error, Ownership};
use latchkey_testkit::{ClientAuth, TlsCerts};

const NAME: &str = "redis.test.invalid";

/// The test options over TLS with `certs`' CA and client certificate.
fn builder(url: &str, certs: &TlsCerts) -> ClientBuilder {
    Client::builder(url)
        .prefix("test:")
        .command_timeout(Duration::from_millis(1000))
        .pubsub_ping_every(Duration::from_millis(200))
        .tls_ca_file(certs.ca())
        .tls_client_cert_files(certs.client_cert(), certs.client_key())
}

/// Certificates whose server certificate is for [`NAME`] only, and a
/// mutual-TLS server with them on 127.0.0.1.
fn named_server() -> (TlsCerts, RedisServer) {
    let certs = TlsCerts::generate_for(&[NAME]);
    let server = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .start();
    assert!(server.url().starts_with("rediss://127.0.0.1:"));
    (certs, server)
}

fn tls_reason(result: latchkey::Result<Client>) -> String {
    match result {
        Err(Error::Tls { reason }) => reason,
        Err(other) => panic!("expected a TLS error, got {other:?}"),
        Ok(_) => panic!("expected a TLS error, got a connection"),
    }
}

fn bad_input(result: latchkey::Result<Client>) -> String {
    match result {
        Err(Error::InvalidInput(why)) => why,
        Err(other) => panic!("expected bad input, got {other:?}"),
        Ok(_) => panic!("expected bad input, got a connection"),
    }
}

#[tokio::test]
async fn without_the_override_the_address_is_refused() {
    let (certs, server) = named_server();
    let reason = tls_reason(builder(&server.url(), &certs).connect().await);
    assert!(
        reason.contains("not valid for the host in the URL"),
        "{reason}"
    );
}

#[tokio::test]
async fn with_the_override_locks_waiting_and_signals_work() {
    let (certs, server) = named_server();
    let connect = || async {
        builder(&server.url(), &certs)
            .tls_server_name(NAME)
            .connect()
            .await
            .expect("connect under the server-name override")
    };
    let (a, b) = (connect().await, connect().await);

    core_paths(&server, &a, &b, "sni").await;
}

#[tokio::test]
async fn the_command_connection_reconnects_under_the_override() {
    let (certs, server) = named_server();
    let client = builder(&server.url(), &certs)
        .tls_server_name(NAME)
        .connect()
        .await
        .unwrap();
    let first = client.lock("sni-before", Duration::from_secs(30)).unwrap();
    let guard = first.try_acquire().await.unwrap().expect("free lock");
    let killed = server
        .command(&["CLIENT", "KILL", "TYPE", "normal"])
        .unwrap();
    assert_ne!(killed, "0", "no connection was killed");
    // The killed connection may fail one command; a later one reconnects.
    let lock = client.lock("sni-after", Duration::from_secs(30)).unwrap();
    let mut taken = None;
    for _ in 0..5 {
        match lock.try_acquire().await {
            Ok(got) => {
                taken = got;
                break;
            }
            Err(e) => assert!(e.is_transient(), "{e:?}"),
        }
    }
    let taken = taken.expect("a command after the kill reconnects");
    assert_eq!(taken.release().await.unwrap(), Ownership::Owned);
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_wrong_name_is_refused() {
    let (certs, server) = named_server();
    let result = builder(&server.url(), &certs)
        .tls_server_name("other.test.invalid")
        .connect()
        .await;
    let reason = tls_reason(result);
    assert!(
        reason.contains("not valid for the host in the URL"),
        "{reason}"
    );
}

#[tokio::test]
async fn bad_names_and_a_plain_url_are_bad_input() {
    let certs = TlsCerts::generate_for(&[NAME]);
    // Nothing listens on port 1: each is refused before connecting.
    for (name, why) in [
        ("", "empty"),
        ("  ", "empty"),
        ("not a name!", "not a valid DNS name"),
        ("127.0.0.1", "IP address"),
    ] {
        let result = builder("rediss://127.0.0.1:1/", &certs)
            .tls_server_name(name)
            .connect()
            .await;
        let got = bad_input(result);
        assert!(got.contains(why), "{name:?}: {got}");
    }
    let result = Client::builder("redis://127.0.0.1:1/")
        .tls_server_name(NAME)
        .connect()
        .await;
    let got = bad_input(result);
    assert!(got.contains("rediss://"), "{got}");
}

/// A `rediss://` replica is reached under the same name: a signal listener
/// subscribes there too.
#[tokio::test]
async fn a_tls_replica_is_reached_under_the_same_name() {
    let (certs, primary) = named_server();
    let replica = RedisServer::builder()
        .tls(&certs, ClientAuth::Required)
        .arg("tls-replication", "yes")
        .replica_of(primary.port())
        .start();
    let client = builder(&primary.url(), &certs)
        .tls_server_name(NAME)
        .replica(&replica.url())
        .connect()
        .await
        .expect("connect under the override");
    // `listen` returns once one server confirmed, either of the two.
    let _listener = client.listen(["sni-replicated"]).await.unwrap();
    let channel = "test:signal:sni-replicated";
    eventually(
        "the listener subscribed on the primary and the replica",
        || async { (primary.subscribers(channel), replica.subscribers(channel)) == (1, 1) },
    )
    .await;
}

/// A cluster's nodes are reached by the addresses they announce: the
/// override is refused there rather than applied to the seed alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_refuses_the_override() {
    let certs = TlsCerts::generate();
    let cluster = tls_cluster(&certs).await;
    // `localhost` is on the certificate: the seed connection succeeds, and
    // the refusal is for the cluster, not the handshake.
    let result = builder(&cluster.seed_url(), &certs)
        .tls_server_name("localhost")
        .connect()
        .await;
    let got = bad_input(result);
    assert!(got.contains("Redis Cluster"), "{got}");
    assert!(got.contains("cluster-announce-hostname"), "{got}");
}

/// Redlock: every instance under the same name, each reached at its own
/// address (its certificate carries only that name); without the name none
/// of them is reachable.
#[tokio::test]
async fn redlock_instances_take_the_same_name() {
    let certs = TlsCerts::generate_for(&[NAME]);
    let servers: Vec<RedisServer> = (0..3)
        .map(|_| {
            RedisServer::builder()
                .tls(&certs, ClientAuth::Required)
                .start()
        })
        .collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let options = |b: ClientBuilder| {
        b.prefix("test:")
            .tls_ca_file(certs.ca())
            .tls_client_cert_files(certs.client_cert(), certs.client_key())
    };
    assert!(
        latchkey::Redlock::connect_with(&urls, options)
            .await
            .is_err(),
        "connected by address to certificates without it"
    );
    let redlock = latchkey::Redlock::connect_with(&urls, |b| options(b).tls_server_name(NAME))
        .await
        .expect("Redlock under the server-name override");
    assert_eq!(redlock.connected(), 3);
    let guard = redlock
        .lock("sni-redlock", Duration::from_secs(5))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free lock");
    // The acquire returns at a majority; the last instance's request runs
    // on in its own task, so it is waited for.
    for server in &servers {
        latchkey_testkit::eventually("every instance holds the lock", || async {
            server.command(&["GET", "test:sni-redlock"]).unwrap() == guard.token()
        })
        .await;
    }
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}
