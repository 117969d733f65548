//! Sentinel and TLS together: the Sentinels are reached plainly, the
//! primary they name over TLS (`rediss://` in the builder's URL, the test
//! CA, and in one test the client certificate). The data nodes of the kit's
//! TLS Sentinel set serve TLS only (`--port 0`) and replicate over TLS, so
//! nothing here can reach them over a plain connection.
//!
//! Locks, a waiter woken by a release (the subscriber connects to the
//! primary over TLS), signals; then `SENTINEL FAILOVER` with a lock held
//! and waited on: the clients follow to the new primary over TLS. A CA
//! that did not sign the servers' certificates is refused as `Error::Tls`,
//! and the TLS server-name override applies to each primary named.
//!
//! The figures these tests print (`--nocapture`) are the ones in
//! `docs/reliability.md`, "Sentinel".

use crate::common;

use std::time::{Duration, Instant};

use common::sentinel::{blocking, signal_until_heard, start_set, until_served, FOLLOW_BOUND};
use common::{core_paths, spawn_waiting, until_subscribed};
use latchkey::{Client, ClientBuilder, Error, Ownership};
use latchkey_testkit::{ClientAuth, SentinelSet, TlsCerts};

/// The primary's settings for a Sentinel client: `rediss://` says the
/// primary the Sentinels name is reached over TLS; the host is a
/// placeholder (the Sentinels give the address, whose certificate must
/// carry it: here `127.0.0.1`).
const PRIMARY_SETTINGS: &str = "rediss://127.0.0.1/";

/// A client of `set` through its Sentinels, trusting `trust`'s CA, and
/// presenting `trust`'s client certificate if `mutual`.
fn builder(set: &SentinelSet, trust: &TlsCerts, mutual: bool) -> ClientBuilder {
    let builder = Client::builder(PRIMARY_SETTINGS)
        .sentinel(set.sentinel_addrs(), set.master_name())
        .prefix("test:")
        .command_timeout(Duration::from_millis(1000))
        .pubsub_ping_every(Duration::from_millis(200))
        .tls_ca_file(trust.ca());
    if mutual {
        builder.tls_client_cert_files(trust.client_cert(), trust.client_key())
    } else {
        builder
    }
}

async fn tls_set(certs: &TlsCerts, auth: ClientAuth) -> SentinelSet {
    start_set(SentinelSet::builder().tls(certs, auth)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_waiting_and_signals_follow_a_failover_over_tls() {
    let certs = TlsCerts::generate();
    let set = tls_set(&certs, ClientAuth::No).await;
    let a = builder(&set, &certs, false).connect().await.unwrap();
    let b = builder(&set, &certs, false).connect().await.unwrap();
    let first = set.primary_port();
    assert!(set.primary().url().starts_with("rediss://"));
    assert!(a.server().ends_with(&format!(":{first}")), "{}", a.server());
    core_paths(set.primary(), &a, &b, "stls-core").await;
    follows_a_failover(set, &a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_through_sentinels_follows_a_failover() {
    let certs = TlsCerts::generate();
    let set = tls_set(&certs, ClientAuth::Required).await;
    // The primary does ask for a certificate: without one, refused.
    match builder(&set, &certs, false).connect().await {
        Err(Error::Tls { reason }) => {
            assert!(reason.contains("requires a client certificate"), "{reason}")
        }
        other => panic!("expected a TLS error, got {:?}", other.map(|_| ())),
    }
    let a = builder(&set, &certs, true).connect().await.unwrap();
    let b = builder(&set, &certs, true).connect().await.unwrap();
    core_paths(set.primary(), &a, &b, "stls-mutual").await;
    follows_a_failover(set, &a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_that_did_not_sign_the_primary_is_a_tls_error() {
    let certs = TlsCerts::generate();
    let stranger = TlsCerts::generate();
    let set = tls_set(&certs, ClientAuth::No).await;
    // The Sentinels answer (plainly); the primary they name is refused.
    let result = builder(&set, &stranger, false).connect().await;
    let reason = match result {
        Err(Error::Tls { reason }) => reason,
        other => panic!("expected a TLS error, got {:?}", other.map(|_| ())),
    };
    assert!(reason.contains("not signed by a CA we trust"), "{reason}");
    assert!(reason.contains("UnknownIssuer"), "{reason}");
    assert!(!Error::Tls { reason }.is_transient());
    // `builder_sentinel` (and `redis+sentinel://`) give the primary a
    // `redis://` URL: TLS options there are refused, not ignored.
    let plain = Client::builder_sentinel(set.sentinel_addrs(), set.master_name())
        .tls_ca_file(certs.ca())
        .connect()
        .await;
    match plain {
        Err(Error::InvalidInput(why)) => assert!(why.contains("rediss://"), "{why}"),
        other => panic!("expected bad input, got {:?}", other.map(|_| ())),
    }
    // The right CA on the same set connects: the refusal was the CA's.
    let client = builder(&set, &certs, false).connect().await.unwrap();
    assert_eq!(client.signal("nobody", b"x").await.unwrap(), 0);
}

/// A server certificate for a DNS name only (not the address the Sentinels
/// give): refused by address, served under the TLS server-name override,
/// which applies to whichever primary the Sentinels name, also after a
/// failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_name_override_reaches_each_primary_the_sentinels_name() {
    const NAME: &str = "redis.test.invalid";
    let certs = TlsCerts::generate_for(&[NAME]);
    let set = tls_set(&certs, ClientAuth::Required).await;
    match builder(&set, &certs, true).connect().await {
        Err(Error::Tls { reason }) => {
            assert!(reason.contains("not valid for the host"), "{reason}")
        }
        other => panic!("expected a TLS error, got {:?}", other.map(|_| ())),
    }
    let named = || builder(&set, &certs, true).tls_server_name(NAME).connect();
    let a = named().await.unwrap();
    let b = named().await.unwrap();
    core_paths(set.primary(), &a, &b, "stls-named").await;
    follows_a_failover(set, &a, &b).await;
}

/// `SENTINEL FAILOVER` while `a` holds a lock (watchdog on) that `b` waits
/// for and `b` listens for signals: both clients are served by the new
/// primary (over TLS) within [`FOLLOW_BOUND`], the held lock survives, a
/// signal goes round, and the waiter gets the lock when it is released.
async fn follows_a_failover(set: SentinelSet, a: &Client, b: &Client) {
    let first = set.primary_port();
    let lock = a
        .lock("report", Duration::from_secs(6))
        .unwrap()
        .with_watchdog();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let waiting = spawn_waiting(
        b.lock("report", Duration::from_secs(6)).unwrap(),
        Duration::from_secs(20),
    )
    .await;
    until_subscribed(set.primary(), "{test:report}:released", 1).await;
    let mut listener = b.listen(["deploy"]).await.unwrap();
    let (set, ()) = blocking(set, |set| set.wait_replicas_synced()).await;

    let (set, second) = blocking(set, |set| set.failover()).await;
    assert_ne!(second, first);
    // Both clients probe at once, from the announcement on.
    let (took_a, took_b) = tokio::join!(
        until_served(a, &set, second, "a"),
        until_served(b, &set, second, "b")
    );
    eprintln!(
        "SENTINEL FAILOVER over TLS: commands served by the new primary {took_a:?} \
         (holder's client) and {took_b:?} (waiter's) after the announcement"
    );
    assert!(took_a < FOLLOW_BOUND, "took {took_a:?}");
    assert!(took_b < FOLLOW_BOUND, "took {took_b:?}");
    assert!(
        a.server().ends_with(&format!(":{second}")),
        "{}",
        a.server()
    );
    assert_eq!(
        set.server(second).command(&["PING"]).unwrap(),
        "PONG",
        "the new primary speaks TLS only, and answers the kit over it"
    );

    // The held lock was replicated, the waiter's mark (its release will
    // publish) with it: still ours on the new primary.
    assert_eq!(
        guard.extend(Duration::from_secs(6)).await.unwrap(),
        Ownership::Owned
    );
    assert_eq!(
        set.server(second).command(&["GET", "test:report"]).unwrap(),
        format!("{}{}", guard.token(), latchkey::protocol::WAITING_MARK)
    );
    assert!(!guard.lost_signal().is_lost());

    // The listener re-subscribed on the new primary (over TLS). Signals are
    // fire-and-forget: resend until one arrives, bounded.
    let heard = signal_until_heard(a, &mut listener, "v2").await;
    assert_eq!(heard.payload, b"v2");

    // The waiter, re-subscribed on the new primary, is handed the lock
    // there when it is released.
    until_subscribed(set.server(second), "{test:report}:released", 1).await;
    let released = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let (got, handed) = waiting.await.unwrap().expect("the waiter gets the lock");
    let handover = got.duration_since(released);
    eprintln!("hand-over after the failover over TLS: {handover:?}");
    assert!(handover < Duration::from_secs(2), "took {handover:?}");
    assert_eq!(
        set.server(second).command(&["GET", "test:report"]).unwrap(),
        handed.token()
    );
    assert_eq!(handed.release().await.unwrap(), Ownership::Owned);
}
