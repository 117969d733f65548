//! A release that lands while Redis restarts: it is
//! retried while the hold is valid, so the lock is free as soon as Redis is
//! back, instead of sitting idle until its TTL.

use std::time::{Duration, Instant};

use latchkey::{Client, Ownership};
use latchkey_testkit::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_during_a_restart_frees_the_lock_when_redis_is_back() {
    // AOF: the lock survives the restart, as it would in production.
    let mut server = RedisServer::builder().aof(true).start();
    let client = Client::builder(&server.url())
        .prefix("test:")
        .command_timeout(Duration::from_millis(500))
        .connect()
        .await
        .unwrap();
    let ttl = Duration::from_secs(20);
    let guard = client
        .lock("restarting", ttl)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let token = guard.token().to_owned();
    server.stop();
    let started = Instant::now();
    let restarting = tokio::task::spawn_blocking(move || {
        // Down for longer than one try and its first retries take.
        std::thread::sleep(Duration::from_millis(1500));
        server.restart();
        server
    });
    let released = guard.release().await;
    let server = restarting.await.unwrap();
    assert_eq!(
        released.unwrap(),
        Ownership::Owned,
        "the release was not retried"
    );
    assert!(
        started.elapsed() < ttl,
        "released only after {:?}",
        started.elapsed()
    );
    // Free at once, not at its TTL.
    assert_eq!(
        server
            .command(&["EXISTS", "test:restarting"])
            .unwrap()
            .trim(),
        "0"
    );
    let again = client
        .lock("restarting", ttl)
        .unwrap()
        .try_acquire()
        .await
        .unwrap();
    let again = again.expect("the lock is free after the restart");
    assert_ne!(again.token(), token);
    assert_eq!(again.release().await.unwrap(), Ownership::Owned);
}

/// The same for the other holds, through the shared background release
/// (`vocab/retry.rs`, `until_deadline`): a permit, a read hold and a
/// leadership dropped while Redis is down are given back when it is back,
/// not at their TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_dropped_during_a_restart_are_given_back_when_redis_is_back() {
    let mut server = RedisServer::builder().aof(true).start();
    let client = Client::builder(&server.url())
        .prefix("test:")
        .command_timeout(Duration::from_millis(500))
        .connect()
        .await
        .unwrap();
    let ttl = Duration::from_secs(20);
    let permit = client
        .semaphore("permits", 1, ttl)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("a permit");
    let reader = client
        .rwlock("shared", ttl)
        .unwrap()
        .try_read()
        .await
        .unwrap()
        .expect("a read hold");
    let leadership = client
        .election("leader", ttl)
        .unwrap()
        .try_campaign("first")
        .await
        .unwrap()
        .expect("leadership");

    server.stop();
    let started = Instant::now();
    drop(permit);
    drop(reader);
    drop(leadership);
    // Down for longer than one try and its first retries take.
    std::thread::sleep(Duration::from_millis(1500));
    server.restart();
    assert!(
        client.flush(Duration::from_secs(10)).await,
        "the background releases did not finish"
    );
    assert!(
        started.elapsed() < ttl,
        "given back only after {:?}",
        started.elapsed()
    );
    // Checked by a client of its own, connected after the restart.
    let checker = Client::builder(&server.url())
        .prefix("test:")
        .connect()
        .await
        .unwrap();
    let semaphore = checker.semaphore("permits", 1, ttl).unwrap();
    let permit = semaphore.try_acquire().await.unwrap();
    assert!(permit.is_some(), "the dropped permit was not given back");
    let rwlock = checker.rwlock("shared", ttl).unwrap();
    let writer = rwlock.try_write().await.unwrap();
    assert!(writer.is_some(), "the dropped read hold was not given back");
    let election = checker.election("leader", ttl).unwrap();
    let next = election.try_campaign("second").await.unwrap();
    assert!(next.is_some(), "the dropped leadership was not resigned");
}
