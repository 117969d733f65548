//! A holder learns at once that its hold ended: every kind of hold checks
//! itself (one round trip) when it hears a revocation on its channel, and
//! when its subscriber connection comes back after a drop (a Redis that
//! restarted without its data), instead of at its next renewal (up to a
//! third of its TTL later). Every hold says why it was lost.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::{Client, Guard, LostReason};

/// Long: renewals come every 10 s, so a loss seen within `AT_ONCE` was
/// not found by a renewal.
const TTL: Duration = Duration::from_secs(30);
const AT_ONCE: Duration = Duration::from_secs(3);

/// Waits until `hold` is listening on `channel` (its watch subscribes
/// shortly after the hold begins), then revokes `name` and returns how long
/// `lost` took, checking the reason.
async fn revoke_and_time<G: Guard>(
    server: &RedisServer,
    operator: &Client,
    hold: &G,
    name: &str,
    channel: &str,
    subscribers: u64,
) -> Duration {
    until_subscribed(server, channel, subscribers).await;
    assert!(hold.is_held(), "{name}: held before the revocation");
    let revoked_at = Instant::now();
    let revoked = operator.revoke(name).await.unwrap();
    assert!(!revoked.is_empty(), "{name}: nothing revoked");
    tokio::time::timeout(AT_ONCE, hold.lost())
        .await
        .unwrap_or_else(|_| panic!("{name}: lost() did not fire at once after the revocation"));
    let took = revoked_at.elapsed();
    assert!(!hold.is_held());
    assert_eq!(hold.lost_reason(), Some(LostReason::Revoked), "{name}");
    took
}

#[tokio::test]
async fn every_kind_of_hold_learns_a_revocation_at_once() {
    let server = RedisServer::start();
    let holder = client(&server.url()).await;
    let operator = client(&server.url()).await;

    let lock = holder.lock("job", TTL).unwrap().with_watchdog();
    let guard = lock.acquire().await.unwrap();
    revoke_and_time(&server, &operator, &guard, "job", "{test:job}:released", 1).await;

    let fair = holder
        .lock("fair-job", TTL)
        .unwrap()
        .fair()
        .unwrap()
        .with_watchdog();
    let guard = fair.try_acquire().await.unwrap().expect("free");
    revoke_and_time(
        &server,
        &operator,
        &guard,
        "fair-job",
        "{test:fair-job}:released",
        1,
    )
    .await;

    let pool = holder.semaphore("pool", 2, TTL).unwrap().with_watchdog();
    let a = pool.try_acquire().await.unwrap().expect("free");
    let b = pool.try_acquire().await.unwrap().expect("free");
    revoke_and_time(
        &server,
        &operator,
        &a,
        "pool",
        "{test:pool}:permits:released",
        1,
    )
    .await;
    tokio::time::timeout(AT_ONCE, b.lost())
        .await
        .expect("the other permit too");
    assert_eq!(b.lost_reason(), Some(LostReason::Revoked));

    // First tries only: a wait subscribes to the channel too, and would
    // count among its subscribers until its unsubscription is sent.
    let rw = holder.rwlock("catalog", TTL).unwrap().with_watchdog();
    let writer = rw.try_write().await.unwrap().expect("free");
    revoke_and_time(
        &server,
        &operator,
        &writer,
        "catalog",
        "{test:catalog}:rw:released",
        1,
    )
    .await;
    let rw = holder.rwlock("index", TTL).unwrap().with_watchdog();
    let reader = rw.try_read().await.unwrap().expect("free");
    revoke_and_time(
        &server,
        &operator,
        &reader,
        "index",
        "{test:index}:rw:released",
        1,
    )
    .await;

    let both = holder
        .lock_all(&["left", "right"], TTL)
        .unwrap()
        .with_watchdog();
    let guard = both.try_acquire().await.unwrap().expect("free");
    until_subscribed(&server, "{test:left}:released", 1).await;
    revoke_and_time(
        &server,
        &operator,
        &guard,
        "right",
        "{test:right}:released",
        1,
    )
    .await;

    // A leader learns it was revoked (not that its lease is gone) from the
    // revocation itself, and an observer still follows the election.
    let election = holder.election("vote", TTL).unwrap();
    let leader = election.try_campaign("me").await.unwrap().expect("free");
    let mut observer = operator
        .election("vote", TTL)
        .unwrap()
        .observe()
        .await
        .unwrap();
    assert_eq!(
        observer.next().await.unwrap().map(|l| l.term),
        Some(leader.term())
    );
    revoke_and_time(
        &server,
        &operator,
        &leader,
        "vote",
        "{test:vote}:election:changes",
        2,
    )
    .await;
    assert!(
        observer.next().await.unwrap().is_none(),
        "the leader is gone"
    );
}

/// A hold without a watchdog is watched once someone waits for its `lost`.
#[tokio::test]
async fn a_hold_without_a_watchdog_learns_it_once_its_lost_signal_is_taken() {
    let server = RedisServer::start();
    let holder = client(&server.url()).await;
    let operator = client(&server.url()).await;
    let guard = holder.lock("plain", TTL).unwrap().acquire().await.unwrap();
    let signal = guard.lost_signal();
    revoke_and_time(
        &server,
        &operator,
        &guard,
        "plain",
        "{test:plain}:released",
        1,
    )
    .await;
    assert!(signal.is_lost());
}

/// A revocation before the hold's watch listens is found by the check the
/// watch makes once it listens (no renewal needed).
#[tokio::test]
async fn a_revocation_before_the_watch_listens_is_found_when_it_does() {
    let server = RedisServer::start();
    let holder = client(&server.url()).await;
    let operator = client(&server.url()).await;
    let guard = holder
        .lock("early", TTL)
        .unwrap()
        .with_watchdog()
        .acquire()
        .await
        .unwrap();
    operator.revoke("early").await.unwrap();
    tokio::time::timeout(AT_ONCE, guard.lost())
        .await
        .expect("lost() fired at once");
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
}

/// Redis restarts without its data (no persistence): another client could
/// take the lock at once. The holder's subscriber reconnects, and the hold
/// checks itself then, long before its next renewal.
#[tokio::test]
async fn a_restart_that_lost_the_data_is_noticed_when_the_connection_comes_back() {
    let mut server = RedisServer::start();
    let holder = client(&server.url()).await;
    let lock = holder.lock("restarted", TTL).unwrap().with_watchdog();
    let guard = lock.acquire().await.unwrap();
    let pool = holder
        .semaphore("restarted-pool", 1, TTL)
        .unwrap()
        .with_watchdog();
    let permit = pool.acquire().await.unwrap();
    until_subscribed(&server, "{test:restarted}:released", 1).await;
    until_subscribed(&server, "{test:restarted-pool}:permits:released", 1).await;
    server.restart();
    let restarted_at = Instant::now();
    // Another client takes the lock at once: the key is gone.
    let other = client(&server.url()).await;
    let theirs = other
        .lock("restarted", TTL)
        .unwrap()
        .try_acquire()
        .await
        .unwrap();
    assert!(theirs.is_some(), "the restart lost the lock's key");
    tokio::time::timeout(TTL / 3, async { tokio::join!(guard.lost(), permit.lost()) })
        .await
        .expect("lost() fired once the connection came back");
    assert!(
        restarted_at.elapsed() < TTL / 3,
        "found by a renewal, not at once"
    );
    // Gone, or taken over if the other client's acquisition came first.
    assert!(
        matches!(
            guard.lost_reason(),
            Some(LostReason::Gone | LostReason::TakenOver)
        ),
        "{:?}",
        guard.lost_reason()
    );
    assert_eq!(permit.lost_reason(), Some(LostReason::Gone));
}

/// Releasing, extending and fencing through the trait work the same for
/// every kind (code generic over `Guard`), and a boxed `Guard` too.
#[tokio::test]
async fn generic_code_holds_every_kind_through_the_guard_trait() {
    async fn cycle<G: Guard + 'static>(guard: G, fenced: bool) {
        assert!(guard.is_held());
        assert_eq!(guard.ttl(), TTL);
        assert!(guard.deadline() > Instant::now());
        assert_eq!(guard.lost_reason(), None);
        if fenced {
            let token = guard.fencing_token().await.unwrap();
            assert_eq!(guard.issued_fencing_token(), Some(token));
        }
        assert_eq!(guard.extend(TTL).await.unwrap(), latchkey::Ownership::Owned);
        let boxed: Box<dyn Guard> = Box::new(guard);
        assert_eq!(boxed.release().await.unwrap(), latchkey::Ownership::Owned);
    }
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    cycle(
        c.lock("g-lock", TTL).unwrap().acquire().await.unwrap(),
        true,
    )
    .await;
    let cached = c.lock("g-cached", TTL).unwrap().with_caching(TTL).unwrap();
    cycle(cached.acquire().await.unwrap(), true).await;
    cycle(
        c.semaphore("g-pool", 2, TTL)
            .unwrap()
            .acquire()
            .await
            .unwrap(),
        true,
    )
    .await;
    let rw = c.rwlock("g-rw", TTL).unwrap();
    cycle(rw.write().await.unwrap(), true).await;
    cycle(rw.read().await.unwrap(), false).await;
    cycle(
        c.lock_all(&["g-a", "g-b"], TTL)
            .unwrap()
            .acquire()
            .await
            .unwrap(),
        true,
    )
    .await;
    cycle(
        c.election("g-vote", TTL)
            .unwrap()
            .campaign("me")
            .await
            .unwrap(),
        true,
    )
    .await;

    let boxed: Box<dyn latchkey::Guard> =
        Box::new(c.lock("g-boxed", TTL).unwrap().acquire().await.unwrap());
    assert!(boxed.is_held());
    assert!(boxed.fencing_token().await.unwrap() > 0);
    assert_eq!(boxed.release().await.unwrap(), latchkey::Ownership::Owned);
}
