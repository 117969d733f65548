//! Waiting without polling: wake-up on release and on expiry, no lost
//! wake-up across a killed subscriber connection, many local waiters, and
//! the polling fallback when pub/sub is not allowed.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use latchkey::Ownership;

#[tokio::test]
async fn a_waiter_wakes_at_release_not_at_expiry() {
    let server = RedisServer::start();
    let holder_client = client(&server.url()).await;
    let waiter_client = client(&server.url()).await;
    let held = holder_client
        .lock("handoff", Duration::from_secs(30))
        .unwrap();
    let guard = held.try_acquire().await.unwrap().unwrap();

    let lock = waiter_client
        .lock("handoff", Duration::from_secs(30))
        .unwrap();
    let waiter = tokio::spawn(async move {
        let g = lock.acquire_until(Duration::from_secs(20)).await.unwrap();
        (Instant::now(), g)
    });
    until_subscribed(&server, "{test:handoff}:released", 1).await;
    let released_at = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let (acquired_at, g) = waiter.await.unwrap();
    let gap = acquired_at - released_at;
    // Milliseconds, not the 30 s TTL: a generous bound for a loaded 2-core CI box.
    assert!(gap < Duration::from_millis(500), "handoff took {gap:?}");
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_waiter_wakes_when_the_holder_vanishes() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let lock = c.lock("vanishing", Duration::from_millis(400)).unwrap();
    let started = Instant::now();
    std::mem::forget(lock.try_acquire().await.unwrap().unwrap()); // holder dies, no release
    let g = lock.acquire_until(Duration::from_secs(5)).await.unwrap();
    let waited = started.elapsed();
    // It cannot get the lock before the TTL ran out, and should not wait much longer.
    assert!(
        waited >= Duration::from_millis(390),
        "acquired a held lock after {waited:?}"
    );
    assert!(
        waited < Duration::from_millis(400 + 300),
        "woke {waited:?} after a 400 ms TTL"
    );
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn no_lost_wakeup_when_the_subscriber_connection_is_killed() {
    let server = RedisServer::start();
    let holder_client = client(&server.url()).await;
    let waiter_client = client(&server.url()).await;
    let guard = holder_client
        .lock("gap", Duration::from_secs(30))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let lock = waiter_client.lock("gap", Duration::from_secs(30)).unwrap();
    let waiter = tokio::spawn(async move { lock.acquire_until(Duration::from_secs(10)).await });
    until_subscribed(&server, "{test:gap}:released", 1).await;

    // Kill the waiter's subscriber connection, and release while it is gone:
    // the release message is published to nobody.
    server
        .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .unwrap();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let started = Instant::now();
    let g = waiter
        .await
        .unwrap()
        .expect("waiter acquired before its deadline");
    // Far below the 30 s TTL: the reconnect made the waiter look again.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_local_waiters_each_get_the_lock_once() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let inside = Arc::new(AtomicUsize::new(0));
    let acquisitions = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let lock = c.lock("crowd", Duration::from_secs(5)).unwrap();
        let (inside, acquisitions) = (inside.clone(), acquisitions.clone());
        tasks.push(tokio::spawn(async move {
            let g = lock.acquire_until(Duration::from_secs(30)).await.unwrap();
            assert_eq!(
                inside.fetch_add(1, Ordering::SeqCst),
                0,
                "two holders at once"
            );
            // Held for 1 ms: long enough for a second holder to be seen.
            tokio::time::sleep(Duration::from_millis(1)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            acquisitions.fetch_add(1, Ordering::SeqCst);
            assert_eq!(g.release().await.unwrap(), Ownership::Owned);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(acquisitions.load(Ordering::SeqCst), 64);
    // Bounded: 64 handoffs of a 1 ms hold; polling at the TTL would take minutes.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn falls_back_to_polling_when_pubsub_is_forbidden() {
    let server = RedisServer::start();
    // A user that may run everything but use no pub/sub channel at all.
    server
        .command(&[
            "ACL",
            "SETUSER",
            "nopubsub",
            "on",
            ">pw",
            "~*",
            "resetchannels",
            "+@all",
        ])
        .unwrap();
    let url = format!("redis://nopubsub:pw@127.0.0.1:{}/", server.port());
    let holder_client = client(&server.url()).await;
    let waiter_client = client(&url).await;
    let guard = holder_client
        .lock("polled", Duration::from_secs(30))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let lock = waiter_client
        .lock("polled", Duration::from_secs(30))
        .unwrap();
    let waiter = tokio::spawn(async move { lock.acquire_until(Duration::from_secs(10)).await });
    // Until it has polled twice (each refused attempt runs the acquire
    // script's busy path, the only PTTL here): it knows it must poll.
    eventually("the waiter polled twice", || async {
        server.calls("pttl") >= 2
    })
    .await;
    let released_at = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let g = waiter
        .await
        .unwrap()
        .expect("the polling waiter got the lock");
    // Polling backs off to at most 500 ms (±50% jitter): well below the 30 s TTL.
    assert!(
        released_at.elapsed() < Duration::from_secs(2),
        "took {:?}",
        released_at.elapsed()
    );
    // The restricted user can still release: the wake-up PUBLISH is best-effort.
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
}

/// Reads the lock key's raw value until `done` says yes (5 s at most): the
/// deterministic sign that a waiter's attempt has reached the server.
async fn until_value(server: &RedisServer, key: &str, done: impl Fn(&str) -> bool) -> String {
    eventually(&format!("{key} has the value awaited"), || async {
        let value = server.command(&["GET", key]).unwrap();
        let value = value.trim();
        done(value).then(|| value.to_owned())
    })
    .await
}

#[tokio::test]
async fn a_release_nobody_waits_for_publishes_nothing() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let lock = c.lock("quiet", Duration::from_secs(30)).unwrap();
    let before = server.calls("publish");
    for _ in 0..20 {
        let guard = lock.acquire().await.unwrap();
        assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    }
    assert_eq!(server.calls("publish") - before, 0);
}

#[tokio::test]
async fn a_waiter_marks_the_holders_token_and_its_release_wakes_it() {
    let server = RedisServer::start();
    let holder_client = client(&server.url()).await;
    let waiter_client = client(&server.url()).await;
    let held = holder_client
        .lock("marked", Duration::from_secs(30))
        .unwrap();
    let guard = held.try_acquire().await.unwrap().unwrap();
    let token = guard.token().to_owned();

    let lock = waiter_client
        .lock("marked", Duration::from_secs(30))
        .unwrap();
    let waiter = tokio::spawn(async move {
        let g = lock.acquire_until(Duration::from_secs(20)).await.unwrap();
        (Instant::now(), g)
    });
    let marked = until_value(&server, "test:marked", |v| v != token).await;
    assert_eq!(
        marked,
        format!("{token}{}", latchkey::protocol::WAITING_MARK)
    );
    // The mark changes nothing for the holder: status, extension, token.
    let info = holder_client.inspect("marked").await.unwrap();
    assert_eq!(info.holder.map(|h| h.pid), Some(std::process::id()));
    assert_eq!(
        guard.extend(Duration::from_secs(30)).await.unwrap(),
        latchkey::Ownership::Owned
    );
    assert!(guard.fencing_token().await.is_ok());
    let before = server.calls("publish");
    let released_at = Instant::now();
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let (acquired_at, g) = waiter.await.unwrap();
    assert_eq!(
        server.calls("publish") - before,
        1,
        "one wake-up for one waiter"
    );
    // Milliseconds, not the 30 s TTL: a generous bound for a loaded 2-core box.
    let gap = acquired_at - released_at;
    assert!(gap < Duration::from_millis(500), "handoff took {gap:?}");
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_waiter_not_allowed_to_mark_still_gets_the_lock() {
    let server = RedisServer::start();
    // May run everything but APPEND: its attempts cannot mark the holder.
    server
        .command(&[
            "ACL", "SETUSER", "noappend", "on", ">pw", "~*", "&*", "+@all", "-append",
        ])
        .unwrap();
    let url = format!("redis://noappend:pw@127.0.0.1:{}/", server.port());
    let holder_client = client(&server.url()).await;
    let waiter_client = client(&url).await;
    let ttl = Duration::from_millis(1500);
    let guard = holder_client
        .lock("unmarked", ttl)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let token = guard.token().to_owned();
    let lock = waiter_client.lock("unmarked", ttl).unwrap();
    let waiter = tokio::spawn(async move { lock.acquire_until(Duration::from_secs(10)).await });
    until_subscribed(&server, "{test:unmarked}:released", 1).await;
    // Its scripted attempt has run once the holder's TTL was asked for (only
    // the busy path of the acquire script sends PTTL); the key must still
    // hold the bare token.
    eventually("the waiter tried once", || async {
        server.calls("pttl") >= 1
    })
    .await;
    assert_eq!(
        server.command(&["GET", "test:unmarked"]).unwrap().trim(),
        token
    );
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    // No mark, no message: woken at the holder's TTL it saw (at most 1.5 s).
    let g = waiter
        .await
        .unwrap()
        .expect("the waiter that could not mark got the lock");
    assert_eq!(g.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_wait_that_cannot_reach_redis_is_an_outage_not_a_conflict() {
    let mut server = RedisServer::start();
    let holder_client = client(&server.url()).await;
    let waiter_client = client(&server.url()).await;
    let guard = holder_client
        .lock("outage", Duration::from_secs(30))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let lock = waiter_client
        .lock("outage", Duration::from_secs(30))
        .unwrap();
    let waiter = tokio::spawn(async move { lock.acquire_until(Duration::from_secs(3)).await });
    until_subscribed(&server, "{test:outage}:released", 1).await;
    server.kill();
    let waited = waiter.await.unwrap();
    assert!(
        matches!(
            waited,
            Err(ref e @ (latchkey::Error::Unreachable(_) | latchkey::Error::Timeout { .. })) if e.is_transient()
        ),
        "an outage must not read as 'still busy': {waited:?}"
    );
    drop(guard);
}

/// A holder of another library (redis-py, node-redlock, redsync: a plain
/// value, and a release that publishes nothing) is polled with a cap, so its
/// release is found within a bounded, small delay instead of at its TTL.
#[tokio::test]
async fn a_foreign_holders_release_is_found_without_waiting_for_its_ttl() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    server
        .command(&["SET", "test:shared", "redis-py-0123456789", "PX", "8000"])
        .unwrap();
    let lock = c.lock("shared", Duration::from_secs(5)).unwrap();
    let waiter = tokio::spawn(async move {
        let guard = lock.acquire_until(Duration::from_secs(7)).await;
        (Instant::now(), guard)
    });
    until_subscribed(&server, "{test:shared}:released", 1).await;
    let attempts_before = server.calls("evalsha") + server.calls("eval");
    // The foreign holder lets go the way those libraries do: a bare DEL.
    let released_at = Instant::now();
    server.command(&["DEL", "test:shared"]).unwrap();
    let (acquired_at, guard) = waiter.await.unwrap();
    let guard = guard.expect("acquired after the foreign release");
    let late = acquired_at - released_at;
    // The poll interval is capped at 200 ms; far below the 8 s TTL left.
    assert!(
        late < Duration::from_millis(1500),
        "found the release {late:?} late"
    );
    // The holder was not marked: its value is not ours to change.
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let attempts = server.calls("evalsha") + server.calls("eval") - attempts_before;
    assert!(attempts <= 10, "{attempts} attempts for one release");
}
