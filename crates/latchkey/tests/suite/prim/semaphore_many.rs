//! Several permits at once (`Semaphore::acquire_many`): k permits or none,
//! one guard for the k; a k-waiter wakes when enough are released; a
//! cancelled k-wait leaves nothing held; the k are renewed, fenced, capped,
//! inspected (counted as k), revoked and lost together; bad k is a typed
//! error.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::inspect::PrimitiveInfo;
use latchkey::{Error, Kind, Ownership};
use redis::AsyncCommands;

/// Long: a waiter that gets its permits within `SOON` was woken by a
/// release's message, not by a TTL running out.
const TTL: Duration = Duration::from_secs(60);
const SOON: Duration = Duration::from_secs(10);
const KEY: &str = "{test:pool}:permits";
const CHANNEL: &str = "{test:pool}:permits:released";

/// The permits set as stored: (member, expiry) pairs.
async fn stored(url: &str) -> Vec<(String, u64)> {
    let mut raw = raw(url).await;
    raw.zrange_withscores(KEY, 0, -1).await.unwrap()
}

#[tokio::test]
async fn a_two_hold_and_a_one_hold_fill_three_and_a_two_try_changes_nothing() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let pool = client.semaphore("pool", 3, TTL).unwrap().with_fencing();
    let two = pool.acquire_many(2).await.unwrap();
    assert_eq!(two.permits(), 2);
    assert!(two.issued_fencing_token().is_some_and(|t| t > 0));
    let one = pool.try_acquire().await.unwrap().expect("the third permit");
    assert_eq!(one.permits(), 1);

    // Stored as k members of one expiry: whoever counts members counts 3.
    let before = stored(&redis.url()).await;
    assert_eq!(before.len(), 3, "{before:?}");
    let members: Vec<&str> = before.iter().map(|(m, _)| m.as_str()).collect();
    assert!(members.contains(&two.token()), "{members:?}");
    assert!(members.contains(&format!("{}#2", two.token()).as_str()));
    let of_two: Vec<u64> = before
        .iter()
        .filter(|(m, _)| m.starts_with(two.token()))
        .map(|(_, e)| *e)
        .collect();
    assert_eq!(of_two.len(), 2);
    assert_eq!(of_two[0], of_two[1], "the k share their expiry");

    // Full: a 2-try and a 1-try fail, and change nothing.
    assert!(pool.try_acquire_many(2).await.unwrap().is_none());
    assert!(pool.try_acquire().await.unwrap().is_none());
    assert_eq!(stored(&redis.url()).await, before);

    // Inspection counts a k-hold as k, each permit named by its holder.
    let holders = pool.holders().await.unwrap();
    assert_eq!(holders.len(), 3);
    assert!(holders.iter().all(|h| h
        .holder
        .as_ref()
        .is_some_and(|h| h.pid == std::process::id())));
    let found = client.describe("pool").await.unwrap();
    let Some(PrimitiveInfo::Semaphore(info)) = found.iter().find(|i| i.kind() == Kind::Semaphore)
    else {
        panic!("a semaphore: {found:?}");
    };
    assert_eq!(info.permits.len(), 3);
    assert!(info.permits.iter().all(|p| p.holder.is_some()));

    // The release gives the k back together; then a 2-hold fits again.
    assert_eq!(two.release().await.unwrap(), Ownership::Owned);
    assert_eq!(stored(&redis.url()).await.len(), 1);
    let again = pool.try_acquire_many(2).await.unwrap().expect("two free");
    assert_eq!(again.release().await.unwrap(), Ownership::Owned);
    assert_eq!(one.release().await.unwrap(), Ownership::Owned);
    assert!(stored(&redis.url()).await.is_empty());
}

#[tokio::test]
async fn a_k_waiter_wakes_when_enough_are_released() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let other = common::client(&redis.url()).await;
    let pool = client.semaphore("pool", 3, TTL).unwrap();
    let singles = [
        pool.acquire().await.unwrap(),
        pool.acquire().await.unwrap(),
        pool.acquire().await.unwrap(),
    ];
    let waiting = other.semaphore("pool", 3, TTL).unwrap();
    let waiter = tokio::spawn(async move { waiting.acquire_many_until(2, SOON).await });
    until_subscribed(&redis, CHANNEL, 1).await;

    let [a, b, c] = singles;
    assert_eq!(a.release().await.unwrap(), Ownership::Owned);
    // One free is not two: nobody can take two now.
    assert!(pool.try_acquire_many(2).await.unwrap().is_none());
    assert!(!waiter.is_finished());
    assert_eq!(b.release().await.unwrap(), Ownership::Owned);
    let both = tokio::time::timeout(SOON, waiter)
        .await
        .expect("woken by the second release")
        .unwrap()
        .expect("two permits at once");
    assert_eq!(both.permits(), 2);
    assert_eq!(stored(&redis.url()).await.len(), 3);
    assert!(pool.try_acquire().await.unwrap().is_none());
    let _ = both.release().await.unwrap();
    let _ = c.release().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_k_wait_leaves_nothing_held() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let pool = client.semaphore("pool", 2, TTL).unwrap();
    let held = pool.acquire_many(2).await.unwrap();
    let waiting = pool.clone();
    let waiter = tokio::spawn(async move { waiting.acquire_many(2).await });
    until_subscribed(&redis, CHANNEL, 1).await;
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    assert!(client.flush(Duration::from_secs(3)).await);
    assert!(stored(&redis.url()).await.is_empty(), "nothing left held");
    eventually("the cancelled waiter unsubscribed", || async {
        redis.subscribers(CHANNEL) == 0
    })
    .await;
    let whole = pool.try_acquire_many(2).await.unwrap().expect("both free");
    let _ = whole.release().await.unwrap();
}

#[tokio::test]
async fn a_k_acquisition_whose_reply_was_lost_gives_all_k_back() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.addr()).await;
    let client = client(&proxy.url()).await;
    let pool = client.semaphore("pool", 3, TTL).unwrap();
    // Warm the script cache (a lost NOSCRIPT reply would stop the attempt).
    let warm = pool.try_acquire_many(3).await.unwrap().expect("free");
    let _ = warm.release().await.unwrap();
    let taken = redis.calls("zadd");
    proxy.set_mode(ProxyMode::DropReplies);
    let attempt = pool.try_acquire_many(3).await;
    assert!(
        matches!(&attempt, Err(e) if e.is_transient()),
        "{attempt:?}"
    );
    assert_eq!(redis.calls("zadd"), taken + 3, "the 3 were taken in Redis");
    assert!(client.flush(Duration::from_secs(3)).await);
    assert!(
        stored(&redis.url()).await.is_empty(),
        "all 3 given back in the background"
    );
}

#[tokio::test]
async fn a_k_hold_is_renewed_fenced_and_revoked_as_one() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let operator = common::client(&redis.url()).await;
    let ttl = Duration::from_millis(600);
    let pool = client
        .semaphore("pool", 3, ttl)
        .unwrap()
        .with_renewal_every(Duration::from_millis(150))
        .unwrap();
    let hold = pool.acquire_many(3).await.unwrap();
    let lost = hold.lost_signal();
    // Three TTLs later all three are still ours: renewed together.
    tokio::time::sleep(ttl * 3).await;
    assert!(hold.is_held() && !lost.is_lost());
    let members = stored(&redis.url()).await;
    assert_eq!(members.len(), 3, "{members:?}");
    assert!(
        members.iter().all(|(_, e)| *e == members[0].1),
        "{members:?}"
    );
    assert!(pool.try_acquire().await.unwrap().is_none());
    let token = hold.fencing_token().await.unwrap();
    assert!(token > 0);

    // Revoked: the whole k-hold ends (3 permits), the counter passes its
    // token, and its next renewal finds it gone.
    let revoked = operator.revoke("pool").await.unwrap();
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    assert_eq!(revoked[0].kind, Kind::Semaphore);
    assert_eq!(revoked[0].ended, 3);
    assert!(revoked[0].fencing_token.is_some_and(|f| f > token));
    tokio::time::timeout(SOON, lost.lost())
        .await
        .expect("lost at the next renewal");
    assert!(stored(&redis.url()).await.is_empty());
    assert_eq!(hold.release().await.unwrap(), Ownership::Expired);
}

#[tokio::test]
async fn a_capped_k_hold_is_lost_at_its_cap_and_its_permits_free() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let (ttl, cap) = (Duration::from_secs(2), Duration::from_secs(1));
    let pool = client
        .semaphore("pool", 2, ttl)
        .unwrap()
        .with_renewal_every(Duration::from_millis(300))
        .unwrap()
        .with_max_hold(cap)
        .unwrap();
    let hold = pool.acquire_many(2).await.unwrap();
    tokio::time::timeout(SOON, hold.lost())
        .await
        .expect("lost at the cap");
    assert_eq!(hold.lost_reason(), Some(latchkey::LostReason::MaxHold));
    eventually("both capped permits are free", || async {
        stored(&redis.url()).await.is_empty()
    })
    .await;
    assert!(matches!(
        hold.extend(ttl).await,
        Err(Error::MaxHoldReached { .. })
    ));
    assert!(pool.try_acquire_many(2).await.unwrap().is_some());
}

#[tokio::test]
async fn bad_k_is_a_typed_error_and_sends_nothing() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let pool = client.semaphore("pool", 3, TTL).unwrap();
    let before = redis.calls("evalsha") + redis.calls("eval");
    for k in [0, 4, u32::MAX] {
        let bad = |r: &latchkey::Result<_>| matches!(r, Err(Error::InvalidCount { .. }));
        assert!(bad(&pool.try_acquire_many(k).await.map(|_| ())), "{k}");
        assert!(bad(&pool.acquire_many(k).await.map(|_| ())), "{k}");
        assert!(bad(&pool.acquire_many_until(k, SOON).await.map(|_| ())));
        let until = std::time::Instant::now() + SOON;
        assert!(bad(&pool.acquire_many_until(k, until).await.map(|_| ())));
    }
    assert_eq!(redis.calls("evalsha") + redis.calls("eval"), before);
    // k = N is fine, and k = 1 is an ordinary permit.
    let all = pool.try_acquire_many(3).await.unwrap().expect("all three");
    assert_eq!(all.permits(), 3);
    let _ = all.release().await.unwrap();
}
