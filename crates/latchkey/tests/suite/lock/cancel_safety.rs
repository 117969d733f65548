//! Cancel safety: a future dropped at any await point leaves no lock behind.
//! Each test cancels behind a fault proxy (so the cancel lands while a
//! request or its reply is on the wire) and shows the lock free within a few
//! round trips, far below its TTL.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::Ownership;

const TTL: Duration = Duration::from_secs(30);

fn exists(server: &RedisServer, key: &str) -> bool {
    server.command(&["EXISTS", key]).unwrap().trim() == "1"
}

/// Until the key is gone; the bound (5 s) is a sixth of the TTL, so a lock
/// left to expire fails the test.
async fn until_gone(server: &RedisServer, key: &str) {
    eventually(&format!("{key} still held: left to its TTL"), || async {
        (!exists(server, key)).then_some(())
    })
    .await
}

#[tokio::test]
async fn a_cancelled_release_is_finished_in_the_background() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr()).await;
    let c = client(&proxy.url()).await;
    // One way 20 ms: a release's round trip takes at least 40 ms, so these
    // cancel before the request is written, while it travels, while Redis
    // has run it but the reply travels back, and just before the reply lands.
    proxy.set_mode(ProxyMode::Delay(Duration::from_millis(20)));
    for cancel_after_ms in [0, 1, 10, 30, 38] {
        let lock = c.lock("cancelled-release", TTL).unwrap().with_watchdog();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        assert!(exists(&server, "test:cancelled-release"));
        let cancelled =
            tokio::time::timeout(Duration::from_millis(cancel_after_ms), guard.release()).await;
        assert!(
            cancelled.is_err(),
            "release finished within {cancel_after_ms} ms"
        );
        until_gone(&server, "test:cancelled-release").await;
    }
}

#[tokio::test]
async fn flush_waits_for_background_releases() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr()).await;
    let c = client(&proxy.url()).await;
    let guard = c
        .lock("flushed", TTL)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    proxy.set_mode(ProxyMode::Delay(Duration::from_millis(100)));
    drop(guard);
    // The background release needs at least 200 ms: flush waits it out.
    assert!(exists(&server, "test:flushed"));
    assert!(
        c.flush(Duration::from_secs(3)).await,
        "background release still running"
    );
    assert!(!exists(&server, "test:flushed"));
    // Nothing left to wait for, and the client is still usable.
    assert!(c.flush(Duration::ZERO).await);
    let again = c
        .lock("flushed", TTL)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn an_acquisition_whose_reply_was_lost_is_released() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr()).await;
    for fenced in [false, true] {
        // A fresh connection each time: the last one lost its replies.
        let c = client(&proxy.url()).await;
        let mut lock = c.lock("lost-reply", TTL).unwrap();
        if fenced {
            lock = lock.with_fencing();
        }
        // Once with replies, so the acquire script is in Redis' cache (a
        // lost NOSCRIPT reply would stop the attempt before it took anything).
        let warm = lock.try_acquire().await.unwrap().expect("free");
        assert_eq!(warm.release().await.unwrap(), Ownership::Owned);
        // Redis takes the lock for us; we never learn it.
        proxy.set_mode(ProxyMode::DropReplies);
        let attempt = lock.try_acquire().await;
        assert!(
            matches!(&attempt, Err(e) if e.is_transient()),
            "{attempt:?}"
        );
        assert!(
            exists(&server, "test:lost-reply"),
            "the request did reach Redis"
        );
        // The owner-only release sent in the background reaches Redis too,
        // even though its reply is dropped as well.
        c.flush(Duration::from_secs(3)).await;
        assert!(
            !exists(&server, "test:lost-reply"),
            "left held until its TTL"
        );
        proxy.set_mode(ProxyMode::Pass);
    }
}

#[tokio::test]
async fn a_cancelled_wait_leaves_no_lock_and_no_subscription() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr()).await;
    let holder = client(&server.url()).await;
    let waiter = client(&proxy.url()).await;
    let held = holder
        .lock("cancelled-wait", TTL)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let lock = waiter.lock("cancelled-wait", TTL).unwrap();
    proxy.set_mode(ProxyMode::Delay(Duration::from_millis(20)));
    // Release while the waiter's attempt travels, then cancel it: its
    // attempt may take the lock, and nobody would know.
    let waiting = tokio::spawn(async move { lock.acquire_until(Duration::from_secs(20)).await });
    until_subscribed(&server, "{test:cancelled-wait}:released", 1).await;
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    tokio::time::sleep(Duration::from_millis(25)).await; // the scenario: cancel mid-flight
    waiting.abort();
    let _ = waiting.await;
    waiter.flush(Duration::from_secs(3)).await;
    until_gone(&server, "test:cancelled-wait").await;
    // The release channel keeps no subscriber of the cancelled waiter.
    eventually("the cancelled waiter is still subscribed", || async {
        server.subscribers("{test:cancelled-wait}:released") == 0
    })
    .await;
}
