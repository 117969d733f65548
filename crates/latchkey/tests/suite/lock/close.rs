//! `Client::close` (etcd's `Session.Close`): every hold the client has out
//! is released and told (`LostReason::Closed`), the ones kept while idle
//! are given back, and no hold is taken after it, not even by a wait that
//! was in flight.

use crate::common;

use std::time::Duration;

use common::*;
use latchkey::{Acquire, Error, Guard, LostReason, Ownership, RwAccess};

const TTL: Duration = Duration::from_secs(30);

#[tokio::test]
async fn close_gives_back_every_kind_of_hold_and_tells_each() {
    let server = RedisServer::start();
    let (c, other) = (client(&server.url()).await, client(&server.url()).await);
    let holds: Vec<Box<dyn Guard>> = vec![
        Box::new(
            c.lock("c-lock", TTL)
                .unwrap()
                .with_watchdog()
                .acquire()
                .await
                .unwrap(),
        ),
        Box::new(
            c.semaphore("c-pool", 1, TTL)
                .unwrap()
                .acquire()
                .await
                .unwrap(),
        ),
        Box::new(c.rwlock("c-rw", TTL).unwrap().write().await.unwrap()),
        Box::new(
            c.lock_all(&["c-a", "c-b"], TTL)
                .unwrap()
                .acquire()
                .await
                .unwrap(),
        ),
        Box::new(
            c.election("c-vote", TTL)
                .unwrap()
                .campaign("me")
                .await
                .unwrap(),
        ),
    ];
    let kept = c.lock("c-kept", TTL).unwrap().with_caching(TTL).unwrap();
    assert_eq!(
        kept.acquire().await.unwrap().release().await.unwrap(),
        Ownership::Owned
    );
    assert_eq!(
        server.command(&["EXISTS", "test:c-kept"]).unwrap(),
        "1",
        "kept while idle"
    );

    assert!(
        c.close(Duration::from_secs(10)).await,
        "every release finished"
    );
    for hold in &holds {
        assert!(!hold.is_held());
        assert_eq!(hold.lost_reason(), Some(LostReason::Closed));
        tokio::time::timeout(Duration::from_secs(1), hold.lost())
            .await
            .expect("lost() fired at the close");
    }
    // Free for everyone else at once, not at their TTLs.
    for name in ["c-lock", "c-a", "c-b", "c-kept"] {
        assert!(
            other
                .lock(name, TTL)
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .is_some(),
            "{name} still held"
        );
    }
    assert!(other
        .semaphore("c-pool", 1, TTL)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .is_some());
    assert!(other
        .rwlock("c-rw", TTL)
        .unwrap()
        .side(RwAccess::Write)
        .try_take()
        .await
        .unwrap()
        .is_some());
    assert!(other
        .election("c-vote", TTL)
        .unwrap()
        .try_campaign("them")
        .await
        .unwrap()
        .is_some());
    // A release after the close found it gone already.
    for hold in holds {
        assert_eq!(hold.release().await.unwrap(), Ownership::Expired);
    }
}

#[tokio::test]
async fn a_closed_client_takes_no_hold_not_even_a_wait_in_flight() {
    let server = RedisServer::start();
    let (c, other) = (client(&server.url()).await, client(&server.url()).await);
    let held = other.lock("busy", TTL).unwrap().acquire().await.unwrap();
    let waiting = tokio::spawn({
        let lock = c.lock("busy", TTL).unwrap();
        async move { lock.acquire_until(Duration::from_secs(20)).await }
    });
    until_subscribed(&server, "{test:busy}:released", 1).await;
    assert!(c.close(Duration::from_secs(5)).await);
    assert!(matches!(
        c.lock("free", TTL).unwrap().try_acquire().await,
        Err(Error::ClientClosed)
    ));
    assert_eq!(Error::ClientClosed.code(), "CLIENT_CLOSED");
    // The holder's release wakes the waiter, whose next attempt is refused.
    assert_eq!(held.release().await.unwrap(), Ownership::Owned);
    let waited = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the wait ended")
        .unwrap();
    assert!(matches!(waited, Err(Error::ClientClosed)), "{waited:?}");
    assert_eq!(server.command(&["EXISTS", "test:busy"]).unwrap(), "0");
    // Idempotent.
    assert!(c.close(Duration::from_secs(1)).await);
}

#[tokio::test]
async fn a_redlock_closes_too() {
    let servers = RedisServer::start_many(3);
    let mut clients = Vec::new();
    for s in &servers {
        clients.push(client(&s.url()).await);
    }
    let redlock = latchkey::Redlock::new(clients).unwrap();
    let guard = redlock
        .lock("r-lock", TTL)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    // An acquire returns at a majority while the last instance's request
    // may not be written yet (its own task, slow under load): a release
    // sent before it would leave that key behind until its TTL.
    eventually("every instance holds r-lock", || async {
        servers
            .iter()
            .all(|s| s.command(&["EXISTS", "test:r-lock"]).unwrap() == "1")
    })
    .await;
    assert!(redlock.close(Duration::from_secs(10)).await);
    assert_eq!(guard.lost_reason(), Some(LostReason::Closed));
    for server in &servers {
        assert_eq!(server.command(&["EXISTS", "test:r-lock"]).unwrap(), "0");
    }
    assert!(matches!(
        redlock.lock("r-lock", TTL).unwrap().try_acquire().await,
        Err(Error::ClientClosed)
    ));
}
