//! One lease under every hold: a lock's guard, a semaphore's permit, a
//! read-write lock's writer and reader, a leadership have the same surface
//! (deadline, is_held, lost, fencing_token, extend, release, forget) and
//! behave the same through it.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use latchkey::{Error, Guard, Ownership};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(20);
const LONGER: Duration = Duration::from_secs(50);

/// The surface every hold has (`latchkey::Guard`), exercised the same way
/// on one hold: its Redis `key` must carry the TTL that `extend` sets.
/// `fenced`: whether the kind has a fencing token.
async fn check_surface<G: Guard + 'static>(
    hold: G,
    conn: &mut redis::aio::MultiplexedConnection,
    key: impl AsRef<[u8]>,
    fenced: bool,
) {
    let before = hold.deadline();
    assert!(hold.is_held());
    assert!(before > Instant::now() && before <= Instant::now() + TTL);
    assert!(!hold.lost_signal().is_lost());
    assert!(!hold.token().is_empty());
    assert_eq!(hold.ttl(), TTL);
    assert_eq!(hold.lost_reason(), None);

    // extend(ttl): the server's TTL and the guard's deadline both move.
    assert_eq!(hold.extend(LONGER).await.unwrap(), Ownership::Owned);
    let pttl: i64 = conn.pttl(key.as_ref()).await.unwrap();
    assert!(pttl > TTL.as_millis() as i64, "PTTL {pttl} after extend");
    assert!(hold.deadline() > before + Duration::from_secs(20));

    // fencing_token: issued once, the same on every later call.
    if fenced {
        let token = hold.fencing_token().await.unwrap();
        assert!(token > 0);
        assert_eq!(hold.fencing_token().await.unwrap(), token);
        assert_eq!(hold.issued_fencing_token(), Some(token));
        assert_eq!(hold.fencing_tokens().await.unwrap(), vec![token]);
    }
    let boxed: Box<dyn Guard> = Box::new(hold);
    assert_eq!(boxed.release().await.unwrap(), Ownership::Owned);
}

#[tokio::test]
async fn every_hold_has_the_same_surface() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let mut conn = raw(&redis.url()).await;

    let lock = client.lock("surface-lock", TTL).unwrap();
    check_surface(lock.acquire().await.unwrap(), &mut conn, lock.key(), true).await;

    let pool = client.semaphore("surface-pool", 2, TTL).unwrap();
    check_surface(
        pool.try_acquire().await.unwrap().unwrap(),
        &mut conn,
        pool.key(),
        true,
    )
    .await;

    let rw = client.rwlock("surface-rw", TTL).unwrap();
    let writer_key = "{test:surface-rw}:rw:writer";
    check_surface(
        rw.try_write().await.unwrap().unwrap(),
        &mut conn,
        writer_key,
        true,
    )
    .await;
    let readers_key = "{test:surface-rw}:rw:readers";
    check_surface(
        rw.try_read().await.unwrap().unwrap(),
        &mut conn,
        readers_key,
        false,
    )
    .await;

    let election = client.election("surface-election", TTL).unwrap();
    let leader = election.try_campaign("me").await.unwrap().unwrap();
    let term = leader.term();
    assert_eq!(leader.fencing_token().await.unwrap(), term);
    check_surface(leader, &mut conn, "{test:surface-election}:leader", true).await;
    assert!(
        election.leader().await.unwrap().is_none(),
        "release resigned"
    );
}

#[tokio::test]
async fn fencing_tokens_are_issued_on_demand_for_permits_and_writers_and_order_the_holds() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let mut conn = raw(&redis.url()).await;

    // A semaphore made without `with_fencing`: the first call issues.
    let pool = client.semaphore("on-demand", 1, TTL).unwrap();
    let first = pool.try_acquire().await.unwrap().unwrap();
    assert_eq!(first.issued_fencing_token(), None);
    let one = first.fencing_token().await.unwrap();
    assert_eq!(first.release().await.unwrap(), Ownership::Owned);
    let fenced = client
        .semaphore("on-demand", 1, TTL)
        .unwrap()
        .with_fencing();
    let second = fenced.try_acquire().await.unwrap().unwrap();
    let two = second
        .issued_fencing_token()
        .expect("issued with the permit");
    assert!(two > one, "one counter: {one} then {two}");
    // The permit vanishes: no token, and the guard knows it lost the permit.
    let second_on_demand = {
        assert_eq!(second.release().await.unwrap(), Ownership::Owned);
        pool.try_acquire().await.unwrap().unwrap()
    };
    let _: i64 = conn.del(pool.key()).await.unwrap();
    assert!(matches!(
        second_on_demand.fencing_token().await,
        Err(Error::NotHeld { .. })
    ));
    assert!(!second_on_demand.is_held());

    // The writer of a read-write lock: issued on demand, above the last.
    let rw = client.rwlock("on-demand-rw", TTL).unwrap().with_fencing();
    let w1 = rw.try_write().await.unwrap().unwrap();
    let t1 = w1.issued_fencing_token().expect("issued with the hold");
    assert_eq!(w1.release().await.unwrap(), Ownership::Owned);
    let plain = client.rwlock("on-demand-rw", TTL).unwrap();
    let w2 = plain.try_write().await.unwrap().unwrap();
    assert!(w2.fencing_token().await.unwrap() > t1);
    assert_eq!(w2.release().await.unwrap(), Ownership::Owned);
    // A reader has none: a typed error, not a made-up number.
    let reader = plain.try_read().await.unwrap().unwrap();
    assert!(matches!(
        reader.fencing_token().await,
        Err(Error::Unsupported(_))
    ));
    assert!(reader.is_held(), "asking does not lose the read hold");
}

#[tokio::test]
async fn a_forgotten_hold_stays_held_until_released_by_its_token() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let mut conn = raw(&redis.url()).await;
    let lock = client.lock("forgotten", TTL).unwrap().with_watchdog();
    let token = lock.acquire().await.unwrap().forget();
    // Nothing is left to release it: flush waits for all background work.
    assert!(client.flush(Duration::from_secs(5)).await);
    let held: Option<String> = conn.get(lock.key()).await.unwrap();
    assert_eq!(held.as_deref(), Some(token.as_str()));
    assert!(lock.try_acquire().await.unwrap().is_none());
    assert_eq!(lock.release_token(&token).await.unwrap(), Ownership::Owned);
    assert!(lock.try_acquire().await.unwrap().is_some());

    // A dropped permit, by contrast, is given back in the background.
    let pool = client.semaphore("forgotten-pool", 1, TTL).unwrap();
    drop(pool.try_acquire().await.unwrap().unwrap());
    assert!(client.flush(Duration::from_secs(5)).await);
    assert!(pool.holders().await.unwrap().is_empty());
    let kept = pool.try_acquire().await.unwrap().unwrap().forget();
    assert!(client.flush(Duration::from_secs(5)).await);
    let holders = pool.holders().await.unwrap();
    assert_eq!(holders.len(), 1);
    assert_eq!(holders[0].token, kept);
}

/// `extend` asks for a life longer than the TTL: the watchdog's renewals
/// that follow keep the key at least that long instead of cutting it back
/// to the TTL, for every kind (the lease is one).
#[tokio::test]
async fn an_extend_longer_than_the_ttl_outlives_the_watchdogs_renewals() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let mut conn = raw(&redis.url()).await;
    let ttl = Duration::from_secs(1);
    let every = Duration::from_millis(100);
    let lock = client.lock("extended", ttl).unwrap();
    let lock = lock.with_renewal_every(every).unwrap();
    let pool = client.semaphore("extended-pool", 1, ttl).unwrap();
    let pool = pool.with_renewal_every(every).unwrap();
    let guard = lock.acquire().await.unwrap();
    let permit = pool.acquire().await.unwrap();
    assert_eq!(guard.extend(LONGER).await.unwrap(), Ownership::Owned);
    assert_eq!(permit.extend(LONGER).await.unwrap(), Ownership::Owned);
    // Several renewal intervals: time passing is what is tested.
    tokio::time::sleep(every * 6).await;
    let pttl: i64 = conn.pttl(lock.key()).await.unwrap();
    assert!(
        pttl > (LONGER - Duration::from_secs(5)).as_millis() as i64,
        "lock PTTL {pttl}"
    );
    let pttl: i64 = conn.pttl(pool.key()).await.unwrap();
    assert!(
        pttl > (LONGER - Duration::from_secs(5)).as_millis() as i64,
        "semaphore PTTL {pttl}"
    );
    assert!(guard.deadline() > Instant::now() + LONGER - Duration::from_secs(5));
    assert!(guard.is_held() && permit.is_held());
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
    assert_eq!(permit.release().await.unwrap(), Ownership::Owned);
}

/// An `extend` past the hold's cap is refused and changes nothing: the
/// program learns it cannot have that long, instead of a deadline quietly
/// shorter than it asked.
#[tokio::test]
async fn an_extend_past_the_max_hold_is_refused_and_changes_nothing() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let mut conn = raw(&redis.url()).await;
    let lock = client.lock("capped-extend", TTL).unwrap();
    let lock = lock.with_max_hold(Duration::from_secs(30)).unwrap();
    let guard = lock.acquire().await.unwrap();
    let before = guard.deadline();
    let refused = guard.extend(LONGER).await;
    assert!(
        matches!(refused, Err(Error::MaxHoldReached { .. })),
        "{refused:?}"
    );
    let pttl: i64 = conn.pttl(lock.key()).await.unwrap();
    assert!(pttl <= TTL.as_millis() as i64, "PTTL {pttl}");
    assert_eq!(guard.deadline(), before);
    assert!(guard.is_held());
    // Within the cap, extending works as ever.
    assert_eq!(guard.extend(TTL).await.unwrap(), Ownership::Owned);
    assert_eq!(guard.release().await.unwrap(), Ownership::Owned);
}

/// `confirm` proves a hold by one round trip without moving its expiry
/// (what a supervisor asks before starting work, even at a hold's cap),
/// and marks a hold found gone lost.
#[tokio::test]
async fn confirm_proves_a_hold_without_moving_its_expiry() {
    let redis = RedisServer::start();
    let client = client(&redis.url()).await;
    let mut conn = raw(&redis.url()).await;
    let lock = client.lock("confirmed", LONGER).unwrap();
    let lock = lock.with_max_hold(TTL).unwrap();
    let guard = lock.acquire().await.unwrap();
    // Past the cap, an extend for the TTL is refused; a confirm is not.
    assert!(matches!(
        guard.extend(LONGER).await,
        Err(Error::MaxHoldReached { .. })
    ));
    assert_eq!(guard.confirm().await.unwrap(), Ownership::Owned);
    let pttl: i64 = conn.pttl(lock.key()).await.unwrap();
    assert!(
        pttl <= LONGER.as_millis() as i64 && pttl > TTL.as_millis() as i64,
        "PTTL {pttl}"
    );
    assert!(guard.is_held());
    let _: () = conn.del(lock.key()).await.unwrap();
    assert_eq!(guard.confirm().await.unwrap(), Ownership::Expired);
    assert!(!guard.is_held());
    assert_eq!(guard.lost_reason(), Some(latchkey::LostReason::Gone));
}
