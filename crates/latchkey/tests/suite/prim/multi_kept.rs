//! Several locks at once against a lock another process keeps while idle
//! (`Lock::with_caching`): the waiter's mark tells the keeper it is wanted,
//! as a single lock's waiter does, so the hold comes back at once instead of
//! at the end of the idle time.

use crate::common;

use std::time::Duration;

use common::*;

/// Long: locks obtained within `SOON` were given back because they were
/// wanted, not because the idle time or the TTL ran out.
const TTL: Duration = Duration::from_secs(30);
const IDLE: Duration = Duration::from_secs(60);
const SOON: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_lock_all_waiter_gets_a_lock_kept_idle_by_another_client_at_once() {
    let redis = RedisServer::start();
    let (keeper, waiter) = (client(&redis.url()).await, client(&redis.url()).await);
    let cached = keeper.lock("x", TTL).unwrap().with_caching(IDLE).unwrap();
    let _ = cached.acquire().await.unwrap().release().await.unwrap();
    assert!(cached.is_kept());
    let both = waiter.lock_all(&["x", "y"], TTL).unwrap();
    let guard = both.acquire_until(SOON).await;
    let guard = guard.expect("given back when wanted, long before the idle time");
    assert!(!cached.is_kept());
    let _ = guard.release().await.unwrap();
}

#[tokio::test]
async fn a_fenced_lock_all_waiter_gets_a_lock_kept_idle_at_once() {
    let redis = RedisServer::start();
    let (keeper, waiter) = (client(&redis.url()).await, client(&redis.url()).await);
    let cached = keeper.lock("y", TTL).unwrap().with_caching(IDLE).unwrap();
    let _ = cached.acquire().await.unwrap().release().await.unwrap();
    let both = waiter.lock_all(&["x", "y"], TTL).unwrap().with_fencing();
    let guard = both.acquire_until(SOON).await;
    let guard = guard.expect("given back when wanted, long before the idle time");
    assert!(!cached.is_kept());
    let _ = guard.release().await.unwrap();
}
