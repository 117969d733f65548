//! `with_hold_at_least(d)`: a hold released or dropped before `d` from its
//! acquisition is kept until then (nobody else can take it), and then
//! ends by itself; one released after `d` is released at once.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::Ownership;

const TTL: Duration = Duration::from_secs(20);
const LEAST: Duration = Duration::from_millis(1500);

#[tokio::test]
async fn a_release_before_the_least_time_keeps_the_lock_until_then() {
    let server = RedisServer::start();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let lock = a
        .lock("cron", TTL)
        .unwrap()
        .with_hold_at_least(LEAST)
        .unwrap();
    let acquired = Instant::now();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    let pttl: i64 = server
        .command(&["PTTL", "test:cron"])
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        pttl > 0 && pttl <= LEAST.as_millis() as i64,
        "kept for the time left, not the TTL: PTTL {pttl}"
    );
    let other = b.lock("cron", TTL).unwrap();
    if Instant::now() < acquired + LEAST - Duration::from_millis(200) {
        assert!(
            other.try_acquire().await.unwrap().is_none(),
            "taken before its least time"
        );
    }
    // Then it ends by itself, and the other takes it at once.
    let taken = other.acquire_until(LEAST + TTL / 4).await.unwrap();
    assert!(acquired.elapsed() >= LEAST - Duration::from_millis(50));
    assert_eq!(taken.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn a_dropped_guard_and_a_permit_are_kept_too() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let lock = c
        .lock("dropped", TTL)
        .unwrap()
        .with_hold_at_least(LEAST)
        .unwrap();
    drop(lock.try_acquire().await.unwrap().expect("free"));
    assert!(c.flush(Duration::from_secs(5)).await);
    let pttl: i64 = server
        .command(&["PTTL", "test:dropped"])
        .unwrap()
        .parse()
        .unwrap();
    assert!(pttl > 0 && pttl <= LEAST.as_millis() as i64, "PTTL {pttl}");

    let pool = c
        .semaphore("pool", 1, TTL)
        .unwrap()
        .with_hold_at_least(LEAST)
        .unwrap();
    let permit = pool.try_acquire().await.unwrap().expect("free");
    assert_eq!(permit.release().await.unwrap(), Ownership::Owned);
    assert!(
        pool.try_acquire().await.unwrap().is_none(),
        "the permit was given back at once"
    );
}

#[tokio::test]
async fn a_release_after_the_least_time_releases_at_once_and_bad_input_is_typed() {
    let server = RedisServer::start();
    let c = client(&server.url()).await;
    let lock = c
        .lock("late", TTL)
        .unwrap()
        .with_hold_at_least(Duration::from_millis(20))
        .unwrap();
    let guard = lock.try_acquire().await.unwrap().expect("free");
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    assert_eq!(server.command(&["EXISTS", "test:late"]).unwrap(), "0");
    assert!(matches!(
        lock.with_hold_at_least(Duration::ZERO),
        Err(latchkey::Error::InvalidTtl { .. })
    ));
}
