//! Waiters behind a holder of their own client: woken by that holder's
//! release without pub/sub (no subscription, no mark, nothing published,
//! no request while it holds), not stuck behind a guard whose lock expired
//! under it or whose release met an outage, and back on pub/sub once no
//! guard of their client is left.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::Ownership;

const CHANNEL: &str = "{test:local}:released";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_a_holder_of_its_own_client_needs_no_pubsub() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let lock = c.lock("local", Duration::from_secs(30)).unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let token = guard.token().to_owned();
    let (sets, scripts) = (server.calls("set"), server.calls("evalsha"));
    let waiter = spawn_waiting(lock.clone(), Duration::from_secs(20)).await;
    assert_eq!(
        (server.calls("set"), server.calls("evalsha")),
        (sets, scripts),
        "a waiter behind a guard of its own client asks Redis nothing"
    );
    assert_eq!(
        server.command(&["GET", "test:local"]).unwrap(),
        token,
        "the holder's token is not marked"
    );
    assert_eq!(server.calls("subscribe"), 0, "nothing subscribed");
    let published = server.calls("publish");
    let released_at = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let (acquired_at, g) = waiter.await.unwrap().unwrap();
    let gap = acquired_at - released_at;
    // Milliseconds, not the 30 s TTL: a generous bound for a loaded 2-core box.
    assert!(gap < Duration::from_millis(500), "handoff took {gap:?}");
    assert_eq!(server.calls("publish"), published, "the release published");
    assert_eq!(server.calls("subscribe"), 0, "nothing subscribed");
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_a_lost_local_holder_listens_for_the_next_one() {
    let server = RedisServer::start();
    let ours = client(&server.url()).await;
    let theirs = client(&server.url()).await;
    let lock = ours.lock("local", Duration::from_secs(30)).unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let waiter = spawn_waiting(lock.clone(), Duration::from_secs(20)).await;
    // Our hold is lost (the key deleted) and another client takes the lock.
    server.command(&["DEL", "test:local"]).unwrap();
    let their_lock = theirs.lock("local", Duration::from_secs(30)).unwrap();
    let their_guard = their_lock.try_acquire().await.unwrap().expect("deleted");
    let their_token = their_guard.token().to_owned();
    // Our guard goes: the waiter now listens for the other client's release.
    assert_eq!(guard.release().await.unwrap(), Ownership::HeldByOther);
    until_subscribed(&server, CHANNEL, 1).await;
    let marked = format!("{their_token}{}", latchkey::protocol::WAITING_MARK);
    eventually("the other holder's token is marked", || async {
        server.command(&["GET", "test:local"]).unwrap() == marked
    })
    .await;
    let released_at = Instant::now();
    assert_eq!(their_guard.release().await.unwrap(), Ownership::Owned);
    let (acquired_at, g) = waiter.await.unwrap().unwrap();
    let gap = acquired_at - released_at;
    assert!(gap < Duration::from_millis(500), "handoff took {gap:?}");
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_a_local_guard_whose_lock_expired_gets_it_at_the_ttl() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    // No watchdog: the guard's lock expires under it, and it never releases.
    let lock = c.lock("local", Duration::from_millis(300)).unwrap();
    let stale = lock.try_acquire().await.unwrap().expect("free");
    let started = Instant::now();
    let waiter = spawn_waiting(lock.clone(), Duration::from_secs(20)).await;
    let (acquired_at, g) = waiter.await.unwrap().unwrap();
    // Bounded by the lock's TTL, not by the wait's 20 s deadline: a generous
    // bound for a loaded 2-core box.
    let waited = acquired_at - started;
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    assert_ne!(g.token(), stale.token());
    assert_eq!(stale.release().await.unwrap(), Ownership::HeldByOther);
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_a_local_guard_outlives_an_outage_at_its_release() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr()).await;
    let c = latchkey::Client::builder(&proxy.url())
        .prefix("test:")
        .command_timeout(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let lock = c.lock("local", Duration::from_secs(2)).unwrap();
    let holder = lock.try_acquire().await.unwrap().expect("free");
    let waiter = spawn_waiting(lock.clone(), Duration::from_secs(20)).await;
    // The network goes silent: the holder's release gets no answer, and the
    // woken waiter's tries fail too.
    proxy.set_mode(ProxyMode::Blackhole);
    let released = holder.release().await;
    assert!(
        released.as_ref().is_err_and(|e| e.is_transient()),
        "{released:?}"
    );
    // Back: the held requests go through (the release among them), and the
    // waiter, retrying, gets the lock.
    proxy.set_mode(ProxyMode::Pass);
    let (_, g) = waiter.await.unwrap().expect("the waiter got the lock");
    assert_eq!(
        server.command(&["GET", "test:local"]).unwrap(),
        g.token(),
        "the waiter holds the lock"
    );
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
}
