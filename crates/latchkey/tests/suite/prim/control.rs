//! Revocation (`Client::revoke`): an operator ends the holds of a name,
//! whoever holds them; the holders' `lost()` fires at their next renewal,
//! the fencing token returned outranks theirs, and the next waiter gets the
//! primitive at once (not at the revoked hold's TTL).

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::{FencedWrite, Kind};

/// Long: a waiter that gets the primitive within `SOON` was woken by the
/// revocation, not by the TTL running out.
const TTL: Duration = Duration::from_secs(30);
const SOON: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_revoked_lock_holder_learns_it_and_its_writes_are_refused() {
    let redis = RedisServer::start();
    let holder = client(&redis.url()).await;
    let operator = client(&redis.url()).await;
    // Renewed every second: the revocation is seen within one.
    let lock = holder
        .lock("stuck", TTL)
        .unwrap()
        .with_renewal_every(Duration::from_secs(1))
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    let token = guard.fencing_token().await.unwrap();
    let resource = holder.fenced("stuck-output").unwrap();
    assert_eq!(
        resource.write(token, b"one").await.unwrap(),
        FencedWrite::Accepted
    );

    let waiting = operator.lock("stuck", TTL).unwrap();
    let waiter = tokio::spawn(async move { waiting.acquire_until(SOON).await });
    let revoked = operator.revoke("stuck").await.unwrap();
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    assert_eq!(revoked[0].kind, Kind::Lock);
    assert_eq!(revoked[0].ended, 1);
    let fence = revoked[0].fencing_token.expect("a raised counter");
    assert!(fence > token);

    // The operator fences the resource: the stale holder's next write is
    // refused before anyone else wrote.
    assert_eq!(
        operator
            .fenced("stuck-output")
            .unwrap()
            .raise(fence)
            .await
            .unwrap(),
        fence
    );
    assert!(matches!(
        resource.write(token, b"two").await.unwrap(),
        FencedWrite::Rejected { .. }
    ));
    tokio::time::timeout(SOON, guard.lost())
        .await
        .expect("lost() fired");
    assert!(!guard.is_held());
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter got the lock at once");
    assert!(next.fencing_token().await.unwrap() > fence);
    assert!(operator.revoke("nothing-here").await.unwrap().is_empty());
}

#[tokio::test]
async fn permits_read_write_holds_and_a_leader_are_revoked() {
    let redis = RedisServer::start();
    let holder = client(&redis.url()).await;
    let operator = client(&redis.url()).await;
    // Renewed every 2 s by their watchdogs: without the revocation they
    // would never be lost.
    let short = Duration::from_secs(6);

    let pool = holder.semaphore("pool", 2, short).unwrap().with_watchdog();
    let (a, b) = (pool.acquire().await.unwrap(), pool.acquire().await.unwrap());
    let revoked = operator.revoke("pool").await.unwrap();
    assert_eq!((revoked[0].kind, revoked[0].ended), (Kind::Semaphore, 2));
    tokio::time::timeout(SOON, async { tokio::join!(a.lost(), b.lost()) })
        .await
        .expect("both permits lost");
    assert!(
        pool.try_acquire().await.unwrap().is_some(),
        "the permits are free"
    );

    let rw = holder.rwlock("catalog", short).unwrap().with_watchdog();
    let readers = (
        rw.read_until(SOON).await.unwrap(),
        rw.read_until(SOON).await.unwrap(),
    );
    let revoked = operator.revoke("catalog").await.unwrap();
    assert_eq!((revoked[0].kind, revoked[0].ended), (Kind::RwLock, 2));
    tokio::time::timeout(SOON, async {
        tokio::join!(readers.0.lost(), readers.1.lost())
    })
    .await
    .expect("both readers lost");
    let writer = rw.try_write().await.unwrap().expect("free for a writer");
    assert_eq!(operator.revoke("catalog").await.unwrap()[0].ended, 1);
    tokio::time::timeout(SOON, writer.lost())
        .await
        .expect("the writer lost");

    let election = holder.election("scheduler", TTL).unwrap();
    let leader = election.campaign("stuck").await.unwrap();
    let candidate = operator.election("scheduler", TTL).unwrap();
    let campaign = tokio::spawn(async move { candidate.campaign_until("next", SOON).await });
    let revoked = operator.revoke("scheduler").await.unwrap();
    assert_eq!((revoked[0].kind, revoked[0].ended), (Kind::Election, 1));
    let next = campaign
        .await
        .unwrap()
        .expect("the candidate took over at once");
    assert!(next.term() > leader.term());
    let fence = revoked[0].fencing_token.expect("above the old term");
    assert!(fence > leader.term() && next.term() >= fence);
    // Its watchdog renews every ttl / 3: the first renewal finds the lease gone.
    tokio::time::timeout(TTL, leader.lost())
        .await
        .expect("the old leader lost");
}

#[tokio::test]
async fn a_revoked_fair_lock_goes_to_the_head_of_its_queue() {
    let redis = RedisServer::start();
    let holder = client(&redis.url()).await;
    let operator = client(&redis.url()).await;
    let lock = holder.lock("queue", TTL).unwrap().fair().unwrap();
    let guard = lock.acquire().await.unwrap();
    let token = guard.fencing_token().await.unwrap();
    let waiting = operator.lock("queue", TTL).unwrap().fair().unwrap();
    let waiter = tokio::spawn(async move { waiting.acquire_until(SOON).await });
    // Revoke once the waiter is queued (a fair lock shows its queue).
    eventually("the waiter is queued", || async {
        operator
            .describe("queue")
            .await
            .unwrap()
            .iter()
            .any(|i| i.kind() == Kind::FairLock)
    })
    .await;
    let revoked = operator.revoke("queue").await.unwrap();
    assert_eq!((revoked[0].kind, revoked[0].ended), (Kind::FairLock, 1));
    assert!(revoked[0].fencing_token.unwrap() > token);
    let next = waiter.await.unwrap().expect("handed to the queued waiter");
    assert!(next.is_held());
}

#[tokio::test]
async fn holders_hear_a_release_request_and_keep_their_hold() {
    let redis = RedisServer::start();
    let holder = client(&redis.url()).await;
    let asker = client(&redis.url()).await;

    let lock = holder.lock("asked", TTL).unwrap();
    let guard = lock.acquire().await.unwrap();
    // A waiter of the same lock: the request must not disturb it.
    let waiting = asker.lock("asked", TTL).unwrap();
    let waiter = tokio::spawn(async move { waiting.acquire_until(SOON).await });
    until_subscribed(&redis, "{test:asked}:released", 1).await;
    {
        let asked = guard.release_requested();
        tokio::pin!(asked);
        // Polled once: now the holder's client listens too (one connection
        // per client: the holder's and the waiter's).
        assert!(futures_poll_once(asked.as_mut()).await.is_none());
        until_subscribed(&redis, "{test:asked}:released", 2).await;
        assert_eq!(asker.request_release("asked").await.unwrap(), 2);
        tokio::time::timeout(SOON, asked)
            .await
            .expect("heard")
            .unwrap();
    }
    assert!(guard.is_held(), "a request takes nothing away");
    assert!(!waiter.is_finished());
    assert_eq!(guard.release().await.unwrap(), latchkey::Ownership::Owned);
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter gets the lock after the release");
    assert!(next.is_held());

    // A permit and a leadership hear it the same way.
    let pool = holder.semaphore("asked-pool", 1, TTL).unwrap();
    let permit = pool.acquire().await.unwrap();
    let election = holder.election("asked-election", TTL).unwrap();
    let leader = election.campaign("me").await.unwrap();
    {
        let (p, l) = (permit.release_requested(), leader.release_requested());
        tokio::pin!(p, l);
        assert!(futures_poll_once(p.as_mut()).await.is_none());
        assert!(futures_poll_once(l.as_mut()).await.is_none());
        until_subscribed(&redis, "{test:asked-pool}:permits:released", 1).await;
        until_subscribed(&redis, "{test:asked-election}:election:changes", 1).await;
        assert_eq!(asker.request_release("asked-pool").await.unwrap(), 1);
        tokio::time::timeout(SOON, p)
            .await
            .expect("the permit heard")
            .unwrap();
        assert_eq!(asker.request_release("asked-election").await.unwrap(), 1);
        tokio::time::timeout(SOON, l)
            .await
            .expect("the leader heard")
            .unwrap();
    }
    assert!(permit.is_held() && leader.is_held());
    assert_eq!(asker.request_release("nobody-holds-this").await.unwrap(), 0);
}

/// Polls `f` once: `Some` if it completed.
async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| match std::pin::Pin::new(&mut f).poll(cx) {
        std::task::Poll::Ready(v) => std::task::Poll::Ready(Some(v)),
        std::task::Poll::Pending => std::task::Poll::Ready(None),
    })
    .await
}

/// `with_max_hold`: the watchdog renews, but never past the cap: `lost`
/// fires the stop margin before the cap (the holder has the margin to
/// stop), extending past the cap is refused, and the lock is free by the
/// cap, for every kind of lease.
#[tokio::test]
async fn a_max_hold_ends_a_renewed_hold_at_its_cap() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let (ttl, cap) = (Duration::from_secs(2), Duration::from_secs(1));
    let every = Duration::from_millis(300);

    let lock = client
        .lock("capped", ttl)
        .unwrap()
        .with_renewal_every(every)
        .unwrap()
        .with_max_hold(cap)
        .unwrap();
    let began = std::time::Instant::now();
    let guard = lock.acquire().await.unwrap();
    tokio::time::timeout(SOON, guard.lost())
        .await
        .expect("lost at the cap");
    // The default margin: a fifth of the TTL, at most half the cap.
    let margin = (ttl / 5).min(cap / 2);
    let lost_after = began.elapsed();
    assert!(
        lost_after + margin / 2 <= cap,
        "lost {lost_after:?} into a {cap:?} cap: too late to stop"
    );
    assert!(
        lost_after + margin + Duration::from_millis(50) >= cap,
        "lost {lost_after:?} into a {cap:?} cap: too soon"
    );
    assert_eq!(guard.lost_reason(), Some(latchkey::LostReason::MaxHold));
    tokio::time::sleep_until((began + cap).into()).await;
    assert!(matches!(
        guard.extend(ttl).await,
        Err(latchkey::Error::MaxHoldReached { .. })
    ));
    let key = String::from_utf8(lock.key().to_vec()).unwrap();
    eventually("the capped lock is free", || async {
        redis.command(&["GET", &key]).unwrap().trim().is_empty()
    })
    .await;
    assert!(lock.try_acquire().await.unwrap().is_some());

    // A permit and a leadership, the same way (the cap is the lease's).
    let pool = client
        .semaphore("capped-pool", 1, ttl)
        .unwrap()
        .with_renewal_every(every)
        .unwrap()
        .with_max_hold(cap)
        .unwrap();
    let permit = pool.acquire().await.unwrap();
    let election = client
        .election("capped-election", ttl)
        .unwrap()
        .with_renewal_every(every)
        .unwrap()
        .with_max_hold(cap)
        .unwrap();
    let leader = election.campaign("me").await.unwrap();
    tokio::time::timeout(SOON, async { tokio::join!(permit.lost(), leader.lost()) })
        .await
        .expect("both lost at the cap");
    assert_eq!(permit.lost_reason(), Some(latchkey::LostReason::MaxHold));
    assert_eq!(leader.lost_reason(), Some(latchkey::LostReason::MaxHold));
    assert!(matches!(
        client.lock("x", ttl).unwrap().with_max_hold(Duration::ZERO),
        Err(latchkey::Error::InvalidInput(_))
    ));
}

/// The failure paths of revocation and release requests: a fencing counter
/// that holds no token is a typed error and nothing is revoked; a Redis
/// that is down is a transient error; a bad name is refused before any
/// request.
#[tokio::test]
async fn revocation_failures_are_typed_and_change_nothing() {
    let mut redis = RedisServer::start();
    let holder = client(&redis.url()).await;
    let operator = client(&redis.url()).await;
    let lock = holder.lock("guarded", TTL).unwrap();
    let guard = lock.acquire().await.unwrap();
    redis
        .command(&["SET", "{test:guarded}:fence", "not-a-token"])
        .unwrap();
    assert!(matches!(
        operator.revoke("guarded").await,
        Err(latchkey::Error::BadFencingCounter { .. })
    ));
    let key = String::from_utf8(lock.key().to_vec()).unwrap();
    assert_eq!(redis.command(&["GET", &key]).unwrap().trim(), guard.token());
    assert!(matches!(
        operator.revoke("").await,
        Err(latchkey::Error::InvalidName { .. })
    ));
    assert!(matches!(
        operator.request_release("").await,
        Err(latchkey::Error::InvalidName { .. })
    ));
    redis.stop();
    let down = operator.revoke("guarded").await.expect_err("Redis is down");
    assert!(down.is_transient(), "{down:?}");
    let down = operator
        .request_release("guarded")
        .await
        .expect_err("Redis is down");
    assert!(down.is_transient(), "{down:?}");
    drop(guard);
}
