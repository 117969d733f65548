//! Waiters that ask (`with_asking`): a waiter of a busy lock, semaphore or
//! read-write lock asks its holder to let go (the holder's
//! `release_requested()` completes) and gets it once the holder releases;
//! it asks each holder once, not on every wake-up; a free lock costs it
//! nothing more than a plain acquisition.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::Ownership;

/// Long: a waiter that gets the lock within `SOON` got it from the holder's
/// release, not from its TTL running out.
const TTL: Duration = Duration::from_secs(30);
const SOON: Duration = Duration::from_secs(10);

#[tokio::test]
async fn an_asking_waiter_is_heard_and_gets_the_lock_at_the_release() {
    let redis = RedisServer::start();
    let holder = client(&redis.url()).await;
    let asker = client(&redis.url()).await;
    let channel = "{test:asked}:released";

    let guard = holder.lock("asked", TTL).unwrap().acquire().await.unwrap();
    // The holder lets go when asked (as `latchkey run` does).
    let holding = tokio::spawn(async move {
        guard.release_requested().await.unwrap();
        guard.release().await.unwrap()
    });
    until_subscribed(&redis, channel, 1).await;

    let asking = asker.lock("asked", TTL).unwrap().with_asking();
    let next = asking
        .acquire_until(SOON)
        .await
        .expect("the asked holder let go");
    assert!(next.is_held());
    assert_eq!(holding.await.unwrap(), Ownership::Owned, "it heard the ask");
    assert_eq!(next.release().await.unwrap(), Ownership::Owned);

    // A free lock: an asking acquisition is a plain one (one SET), asks
    // nobody and runs no script.
    let (publishes, scripts, sets) = (
        redis.calls("publish"),
        redis.calls("evalsha"),
        redis.calls("set"),
    );
    let free = asking.acquire().await.unwrap();
    assert_eq!(redis.calls("publish"), publishes);
    assert_eq!(redis.calls("evalsha"), scripts);
    assert_eq!(redis.calls("set"), sets + 1);
    let _ = free.release().await.unwrap();
}

#[tokio::test]
async fn an_asking_waiter_asks_each_holder_once() {
    let redis = RedisServer::start();
    let holder = client(&redis.url()).await;
    let asker = client(&redis.url()).await;
    let operator = client(&redis.url()).await;
    let (key, channel) = ("test:once", "{test:once}:released");

    // A holder that does not listen: the ask changes nothing for it.
    let guard = holder.lock("once", TTL).unwrap().acquire().await.unwrap();
    let published = redis.calls("publish");
    let asking = asker.lock("once", TTL).unwrap().with_asking();
    let waiter = tokio::spawn(async move { asking.acquire_until(SOON * 3).await });
    until_subscribed(&redis, channel, 1).await;
    eventually("the waiter asked", || async {
        redis.calls("publish") > published
    })
    .await;

    // Others' requests wake it; each is a look at the same holder, which it
    // asked already: no new ask.
    for _ in 0..2 {
        let attempts = redis.calls("evalsha");
        assert_eq!(operator.request_release("once").await.unwrap(), 1);
        eventually("the waiter looked again", || async {
            redis.calls("evalsha") > attempts
        })
        .await;
    }
    assert_eq!(redis.calls("publish"), published + 3, "1 ask + 2 requests");
    assert!(!waiter.is_finished());

    // Another holder by the time it looks (a token put there by hand, as a
    // holder that took the lock between a release and the waiter's look):
    // asked in turn.
    let other = format!("lk2:{}:1700000000000:1:elsewhere", "ab".repeat(16));
    redis
        .command(&["SET", key, &other, "XX", "KEEPTTL"])
        .unwrap();
    redis.command(&["PUBLISH", channel, "released"]).unwrap();
    eventually("the new holder is asked", || async {
        redis.calls("publish") == published + 5
    })
    .await;
    assert!(!waiter.is_finished());

    // It goes: the waiter gets the lock at once.
    redis.command(&["DEL", key]).unwrap();
    redis.command(&["PUBLISH", channel, "released"]).unwrap();
    let got = waiter.await.unwrap().expect("the lock, once free");
    assert!(got.is_held());
    assert_ne!(guard.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn asking_waiters_of_a_semaphore_and_a_read_write_lock_are_heard() {
    let redis = RedisServer::start();
    let holder = client(&redis.url()).await;
    let asker = client(&redis.url()).await;

    // Both permits taken at once; the hold lets go when asked.
    let permits = holder.semaphore("asked-pool", 2, TTL).unwrap();
    let both = permits.acquire_many(2).await.unwrap();
    let holding = tokio::spawn(async move {
        both.release_requested().await.unwrap();
        both.release().await.unwrap()
    });
    until_subscribed(&redis, "{test:asked-pool}:permits:released", 1).await;
    let asking = asker.semaphore("asked-pool", 2, TTL).unwrap().with_asking();
    let permit = asking.acquire_until(SOON).await.expect("a permit");
    assert_eq!(holding.await.unwrap(), Ownership::Owned);
    let _ = permit.release().await.unwrap();

    // A writer asked by a reader.
    let rw = holder.rwlock("asked-doc", TTL).unwrap();
    let writer = rw.write().await.unwrap();
    let holding = tokio::spawn(async move {
        writer.release_requested().await.unwrap();
        writer.release().await.unwrap()
    });
    until_subscribed(&redis, "{test:asked-doc}:rw:released", 1).await;
    let reading = asker.rwlock("asked-doc", TTL).unwrap().with_asking();
    let reader = reading
        .read_until(SOON)
        .await
        .expect("read after the writer");
    assert_eq!(holding.await.unwrap(), Ownership::Owned);
    let _ = reader.release().await.unwrap();
}

/// A fair waiter asks too (once, at its first wait), and a waiter whose
/// holder is a guard of its own client asks it like any other.
#[tokio::test]
async fn fair_and_same_client_holders_are_asked() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;

    let lock = client.lock("mine", TTL).unwrap();
    let guard = lock.acquire().await.unwrap();
    let holding = tokio::spawn(async move {
        guard.release_requested().await.unwrap();
        guard.release().await.unwrap()
    });
    until_subscribed(&redis, "{test:mine}:released", 1).await;
    let next = lock
        .clone()
        .with_asking()
        .acquire_until(SOON)
        .await
        .expect("asked its own client's holder");
    assert_eq!(holding.await.unwrap(), Ownership::Owned);
    let _ = next.release().await.unwrap();

    let fair = client.lock("fair", TTL).unwrap().fair().unwrap();
    let guard = fair.acquire().await.unwrap();
    let holding = tokio::spawn(async move {
        guard.release_requested().await.unwrap();
        guard.release().await.unwrap()
    });
    until_subscribed(&redis, "{test:fair}:released", 1).await;
    let other = common::client(&redis.url()).await;
    let next = other
        .lock("fair", TTL)
        .unwrap()
        .fair()
        .unwrap()
        .with_asking()
        .acquire_until(SOON)
        .await
        .expect("handed on by the asked holder");
    assert_eq!(holding.await.unwrap(), Ownership::Owned);
    let _ = next.release().await.unwrap();
}

#[tokio::test]
async fn a_multi_lock_waiter_asks_the_holder_of_the_busy_lock() {
    let redis = RedisServer::start();
    let holder = client(&redis.url()).await;
    let asker = client(&redis.url()).await;

    let guard = holder.lock("pair-b", TTL).unwrap().acquire().await.unwrap();
    let holding = tokio::spawn(async move {
        guard.release_requested().await.unwrap();
        guard.release().await.unwrap()
    });
    until_subscribed(&redis, "{test:pair-b}:released", 1).await;

    let both = asker
        .lock_all(&["pair-a", "pair-b"], TTL)
        .unwrap()
        .with_asking();
    let held = both
        .acquire_until(SOON)
        .await
        .expect("the holder of pair-b was asked and let go");
    assert_eq!(holding.await.unwrap(), Ownership::Owned, "it heard the ask");
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
}
