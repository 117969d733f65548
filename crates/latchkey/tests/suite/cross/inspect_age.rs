//! Inspection counts a hold's age from when it began, not from when its
//! holder started waiting: a fair lock handed to a queued waiter (or taken
//! by one), a read-write lock's writer that waited, a leader that
//! campaigned. Their tokens were made when they started waiting, so the
//! token's time alone overstates the hold (an operator would revoke a
//! healthy holder that `top` shows as long-held).

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::inspect::PrimitiveInfo;
use latchkey::{Client, RwAccess};

const TTL: Duration = Duration::from_secs(30);
/// How long each waiter waits before it gets its hold.
const WAITED: Duration = Duration::from_millis(1200);
/// A hold just begun shows an age below this (well below `WAITED`).
const FRESH: Duration = Duration::from_millis(600);

/// The age of the holder `describe` shows for `name`'s first held kind.
async fn age(client: &Client, name: &str) -> Duration {
    let found = client.describe(name).await.unwrap();
    let held = found.iter().find(|i| i.holders() > 0).expect("held");
    held.oldest().expect("a latchkey holder").1
}

#[tokio::test]
async fn a_fair_lock_handed_to_a_queued_waiter_is_as_old_as_its_hold() {
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let holder = a.lock("fl", TTL).unwrap().fair().unwrap();
    let guard = holder.acquire().await.unwrap();
    let waiting = b.lock("fl", TTL).unwrap().fair().unwrap();
    let waiter = tokio::spawn(async move { waiting.acquire_until(TTL).await });
    until_queued(&redis, "{test:fl}:queue").await;
    tokio::time::sleep(WAITED).await;
    assert_eq!(guard.release().await.unwrap(), latchkey::Ownership::Owned);
    let next = waiter.await.unwrap().unwrap();
    let shown = age(&a, "fl").await;
    assert!(shown < FRESH, "a hold just handed over shows {shown:?}");
    // `inspect` (describe's lock view: the CLI's busy messages) the same.
    let info = a.inspect("fl").await.unwrap();
    assert!(info.age.unwrap() < FRESH, "{:?}", info.age);
    drop(next);
}

/// A queued waiter that takes the lock itself (its holder released with a
/// plain release, which hands nothing on).
#[tokio::test]
async fn a_queued_waiter_that_takes_the_lock_is_as_old_as_its_hold() {
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let guard = a.lock("taken", TTL).unwrap().acquire().await.unwrap();
    let waiting = b.lock("taken", TTL).unwrap().fair().unwrap();
    let waiter = tokio::spawn(async move { waiting.acquire_until(TTL).await });
    until_queued(&redis, "{test:taken}:queue").await;
    tokio::time::sleep(WAITED).await;
    assert_eq!(guard.release().await.unwrap(), latchkey::Ownership::Owned);
    let next = waiter.await.unwrap().unwrap();
    let shown = age(&a, "taken").await;
    assert!(shown < FRESH, "a hold just taken shows {shown:?}");
    drop(next);
}

#[tokio::test]
async fn a_writer_that_waited_and_a_leader_that_campaigned_are_as_old_as_their_holds() {
    let redis = RedisServer::start();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let reader = a.rwlock("catalog", TTL).unwrap().read().await.unwrap();
    let rw = b.rwlock("catalog", TTL).unwrap();
    let writer = tokio::spawn(async move { rw.acquire_until(RwAccess::Write, far()).await });
    eventually("the writer waits", || async {
        a.describe("catalog")
            .await
            .unwrap()
            .iter()
            .any(|i| match i {
                PrimitiveInfo::RwLock(rw) => !rw.writers_waiting.is_empty(),
                _ => false,
            })
    })
    .await;
    tokio::time::sleep(WAITED).await;
    assert_eq!(reader.release().await.unwrap(), latchkey::Ownership::Owned);
    let written = writer.await.unwrap().unwrap();
    let shown = age(&a, "catalog").await;
    assert!(
        shown < FRESH,
        "a writer that just got the lock shows {shown:?}"
    );
    drop(written);

    let leader = a
        .election("scheduler", TTL)
        .unwrap()
        .campaign("one")
        .await
        .unwrap();
    let candidate = b.election("scheduler", TTL).unwrap();
    let campaign = tokio::spawn(async move { candidate.campaign("two").await });
    until_subscribed(&redis, "{test:scheduler}:election:changes", 1).await;
    tokio::time::sleep(WAITED).await;
    assert_eq!(leader.resign().await.unwrap(), latchkey::Ownership::Owned);
    let next = campaign.await.unwrap().unwrap();
    let shown = age(&a, "scheduler").await;
    assert!(shown < FRESH, "a leader just elected shows {shown:?}");
    drop(next);
}

fn far() -> std::time::Instant {
    std::time::Instant::now() + TTL
}

async fn until_queued(redis: &RedisServer, queue: &str) {
    eventually("the waiter is queued", || async {
        redis.command(&["LLEN", queue]).unwrap().trim() == "1"
    })
    .await;
}
